// Runs named @novu/api operations (operations.mjs) against a Herald.
//
//   node run.mjs <serverURL> <apiKey> <operation>...   the world (ids the operations use) as JSON on stdin
//   node run.mjs --serve                               one JSON request a line on stdin:
//                                                      {"serverURL", "apiKey", "operation", "world"}
//
// Prints one JSON line per operation: {"operation", "ok": true, "result"} or {"operation", "ok": false,
// "error"}. --serve loads the SDK once for many operations (loading it takes seconds).
import { createInterface } from "node:readline";
import { Novu } from "@novu/api";
import { operations } from "./operations.mjs";

const byName = new Map(operations.map((operation) => [operation.name, operation]));

function describe(error) {
  const body = error?.body ?? error?.rawResponse?.body;
  return { name: error?.name, message: String(error?.message ?? error), statusCode: error?.statusCode, body };
}

async function runOne(serverURL, secretKey, name, world) {
  const operation = byName.get(name);
  if (operation === undefined) {
    return { operation: name, ok: false, error: { message: `no operation named ${name}` } };
  }
  // No retries: a failure is reported as it happened.
  const novu = new Novu({ serverURL, secretKey, retryConfig: { strategy: "none" } });
  try {
    const result = await operation.run(novu, world);
    await operation.check(result, novu, world);
    return { operation: name, ok: true, result: result ?? null };
  } catch (error) {
    return { operation: name, ok: false, error: describe(error) };
  }
}

const args = process.argv.slice(2);
if (args[0] === "--serve") {
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const request = JSON.parse(line);
    const outcome = await runOne(request.serverURL, request.apiKey, request.operation, request.world ?? {});
    process.stdout.write(JSON.stringify(outcome) + "\n");
  }
} else {
  const [serverURL, secretKey, ...names] = args;
  if (!serverURL || !secretKey || names.length === 0) {
    console.error("usage: node run.mjs <serverURL> <apiKey> <operation>... (world JSON on stdin) | node run.mjs --serve");
    process.exit(2);
  }
  let input = "";
  for await (const chunk of process.stdin) input += chunk;
  const world = input.trim() ? JSON.parse(input) : {};
  let failed = false;
  for (const name of names) {
    const outcome = await runOne(serverURL, secretKey, name, world);
    console.log(JSON.stringify(outcome));
    failed ||= !outcome.ok;
  }
  process.exit(failed ? 1 : 0);
}
