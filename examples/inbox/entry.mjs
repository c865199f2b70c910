// What the test page loads: @novu/js's Novu and its UI, as published (bundled by esbuild, unmodified).
import { Novu } from "@novu/js";
import { NovuUI } from "@novu/js/ui";

window.HeraldNovu = { Novu, NovuUI };
