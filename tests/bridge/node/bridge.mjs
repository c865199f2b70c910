// A bridge app written with @novu/framework, served with node's http module, for tests/bridge.
//
//   node bridge.mjs <port>
//
// Serves the workflows below at http://127.0.0.1:<port>/api/novu through the framework's own request
// handler (NovuRequestHandler, as its express/next/... adapters do). The framework runs in strict mode:
// every action but health-check must carry a valid novu-signature.
//
// The tests set the secret key (the Herald environment's API key) and which workflows are served with
// `POST /config {"secretKey", "workflows": [ids] | null}`, and read every request the bridge received
// (action, workflowId, stepId, body) with `GET /requests`. Prints "listening <port>" once it listens.
import { createServer } from "node:http";
import { Client, NovuRequestHandler, workflow } from "@novu/framework";

const ORDER_SCHEMA = {
  type: "object",
  properties: { orderId: { type: "string" }, quiet: { type: "boolean", default: false } },
  required: ["orderId"],
  additionalProperties: false,
};

const NAME_SCHEMA = { type: "object", properties: { name: { type: "string" } }, additionalProperties: false };

// Every channel in one run: a custom step first, whose result the channel steps read.
const everyChannel = workflow(
  "every-channel",
  async ({ step, payload, subscriber }) => {
    const lookup = await step.custom("lookup", async () => ({ total: 42 }), {
      outputSchema: { type: "object", properties: { total: { type: "number" } }, required: ["total"] },
    });
    await step.inApp("inbox", async () => ({
      subject: `Order ${payload.orderId}`,
      body: `Total ${lookup.total} for ${subscriber.firstName}`,
      avatar: "https://example.com/avatar.png",
      primaryAction: { label: "View order", redirect: { url: "/orders/1" } },
      redirect: { url: "/orders" },
      data: { orderId: payload.orderId },
    }));
    await step.email("mail", async () => ({
      subject: `Your order ${payload.orderId}`,
      body: `<p>Thanks, ${subscriber.firstName}: total ${lookup.total}.</p>`,
    }));
    await step.sms("text", async () => ({ body: `Order ${payload.orderId} placed` }));
    await step.push("push", async () => ({ subject: "Order placed", body: `Order ${payload.orderId}` }));
    await step.chat("chat", async () => ({ body: `Order ${payload.orderId} for ${subscriber.subscriberId}` }));
  },
  { payloadSchema: ORDER_SCHEMA, name: "Every channel", tags: ["orders"] },
);

// One in-app step that the payload can skip, and a payload schema a trigger can miss.
const skippable = workflow(
  "skippable",
  async ({ step, payload }) => {
    await step.inApp("note", async () => ({ body: `Order ${payload.orderId}` }), {
      skip: () => payload.quiet === true,
    });
    await step.inApp("after", async () => ({ body: "After the note" }));
  },
  { payloadSchema: ORDER_SCHEMA },
);

// A digest then an in-app step that reads what it gathered.
const digested = workflow(
  "digested",
  async ({ step }) => {
    const digest = await step.digest("collect", async () => ({ amount: 2, unit: "seconds" }));
    await step.inApp("summary", async () => ({
      body: `${digest.events.length} events: ${digest.events.map((event) => event.payload.name).join(", ")}`,
    }));
  },
  { payloadSchema: NAME_SCHEMA },
);

// A delay then an in-app step that reads how long it waited.
const delayed = workflow(
  "delayed",
  async ({ step, payload }) => {
    const waited = await step.delay("wait", async () => ({ amount: 1, unit: "seconds" }));
    await step.inApp("after-wait", async () => ({
      body: `After the wait (${typeof waited.duration}), ${payload.name}`,
    }));
  },
  { payloadSchema: NAME_SCHEMA },
);

// An in-app step whose greeting is a control: a value saved in Herald changes what is delivered.
const greeting = workflow(
  "greeting",
  async ({ step, payload }) => {
    await step.inApp(
      "hello",
      async (controls) => ({ subject: controls.subject, body: `${controls.greeting}, ${payload.name}` }),
      {
        controlSchema: {
          type: "object",
          properties: {
            greeting: { type: "string", default: "Hello" },
            subject: { type: "string", default: "Welcome" },
          },
          additionalProperties: false,
        },
      },
    );
  },
  { payloadSchema: NAME_SCHEMA },
);

const ALL = [everyChannel, skippable, digested, delayed, greeting];
let served = ALL;
let secretKey = "not-set";
const requests = [];

function handlerFor() {
  return new NovuRequestHandler({
    frameworkName: "node-http",
    workflows: served,
    client: new Client({ secretKey, strictAuthentication: true }),
    handler: (request, body, response) => ({
      body: () => body,
      headers: (name) => request.headers[name.toLowerCase()],
      method: () => request.method || "GET",
      url: () => new URL(request.url, `http://${request.headers.host}`),
      queryString: (name) => new URL(request.url, "http://bridge").searchParams.get(name) ?? undefined,
      transformResponse: ({ body: answer, headers, status }) => {
        response.writeHead(status, headers);
        response.end(answer);
      },
    }),
  }).createHandler();
}

let handle = handlerFor();

async function readBody(request) {
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

const server = createServer(async (request, response) => {
  const url = new URL(request.url, "http://bridge");
  const text = await readBody(request);
  if (url.pathname === "/config" && request.method === "POST") {
    const config = JSON.parse(text);
    secretKey = config.secretKey ?? secretKey;
    served = config.workflows ? ALL.filter((item) => config.workflows.includes(item.id)) : ALL;
    requests.length = 0;
    handle = handlerFor();
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ workflows: served.map((item) => item.id) }));
    return;
  }
  if (url.pathname === "/requests") {
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify(requests));
    return;
  }
  if (url.pathname !== "/api/novu") {
    response.writeHead(404);
    response.end();
    return;
  }
  const body = text ? JSON.parse(text) : undefined;
  requests.push({
    method: request.method,
    action: url.searchParams.get("action"),
    workflowId: url.searchParams.get("workflowId"),
    stepId: url.searchParams.get("stepId"),
    signature: request.headers["novu-signature"] ?? null,
    body: body ?? null,
  });
  await handle(request, body, response);
});

server.listen(Number(process.argv[2] || 0), "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
