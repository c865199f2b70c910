// The framework's own trigger (`workflow(...).trigger()`), as an app calls it, for tests/bridge.
//
//   node trigger.mjs <apiUrl> <secretKey> <subscriberId> <orderId>
//
// Prints the API's answer ({"data": {"transactionId", ...}}) as one JSON line.
import { workflow } from "@novu/framework";

const [apiUrl, secretKey, to, orderId] = process.argv.slice(2);
process.env.NOVU_API_URL = apiUrl;

const skippable = workflow(
  "skippable",
  async ({ step, payload }) => {
    await step.inApp("note", async () => ({ body: `Order ${payload.orderId}` }));
  },
  {
    payloadSchema: {
      type: "object",
      properties: { orderId: { type: "string" }, quiet: { type: "boolean", default: false } },
      required: ["orderId"],
      additionalProperties: false,
    },
  },
);

const result = await skippable.trigger({ to, payload: { orderId }, secretKey });
console.log(JSON.stringify(result.data));
