/**
 * The function as deployed: the allocator bundle built the way the construct builds it
 * (test/fixtures/allocator-bundle.ts), loaded in a Node process of its own (the Node that runs
 * the suite) with the environment the construct gives the function, handed stream batches by
 * the local poller and then one repair sweep, against the local engine.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBBatchResponse } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SweepSummary } from "../../functions/allocator/handlers.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../../functions/allocator/telemetry-names.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import {
  prefixedTableEnv,
  resolveTableNames,
  type TableNames,
} from "../../functions/store/table-definitions.ts";
import { decodeVipItem } from "../../functions/store/vip-item-codec.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { StreamPoller } from "../../tools/local/poller.ts";
import { buildAllocatorBundle } from "../fixtures/allocator-bundle.ts";
import { dataplane } from "../fixtures/builders.ts";
import { startTestEngine } from "../fixtures/engine.ts";

const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };

/**
 * Plays the Lambda runtime for the bundle: imports it once (the cold start), then for each line
 * on stdin ({event, remainingMs}) calls its `handler` and writes the result, or the error, as
 * one line on fd 3. stdout and stderr stay the function's own (logs, metrics).
 */
const RUNTIME = `
import { createWriteStream } from "node:fs";
import { createInterface } from "node:readline";
const { handler } = await import(process.env.BUNDLE_URL);
const out = createWriteStream(null, { fd: 3 });
for await (const line of createInterface({ input: process.stdin })) {
  const { event, remainingMs } = JSON.parse(line);
  const deadline = Date.now() + remainingMs;
  const context = { getRemainingTimeInMillis: () => deadline - Date.now() };
  try {
    out.write(JSON.stringify({ result: await handler(event, context) }) + "\\n");
  } catch (error) {
    out.write(JSON.stringify({ error: String(error?.stack ?? error) }) + "\\n");
  }
}
`;

/** The bundle in a process of its own; `invoke` sends one event and waits for its answer. */
function startFunction(bundleFile: string, env: Record<string, string>) {
  const child: ChildProcess = spawn(
    process.execPath,
    ["--enable-source-maps", "--input-type=module", "-e", RUNTIME],
    {
      // The environment the construct sets (infra/vip-allocator.ts), on the local engine; no
      // tsx, no project sources: only the bundle's file is loaded.
      env: {
        PATH: process.env.PATH ?? "",
        BUNDLE_URL: pathToFileURL(bundleFile).href,
        AWS_REGION: "us-east-1",
        AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
        POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        // Below Node 22 the set-up has said so once (vitest.config.ts).
        ...(process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED === "true"
          ? { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" }
          : {}),
        ...env,
      },
      stdio: ["pipe", "pipe", "pipe", "pipe"],
    },
  );
  let logs = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    logs += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    logs += chunk.toString();
  });
  const answers = createInterface({ input: child.stdio[3] as NodeJS.ReadableStream });
  const waiting: Array<(line: string) => void> = [];
  answers.on("line", (line) => waiting.shift()?.(line));
  const exited = new Promise<never>((_, reject) => {
    child.once("exit", (code) =>
      reject(new Error(`the function's process exited (${code}):\n${logs}`)),
    );
  });
  exited.catch(() => undefined);
  return {
    get logs() {
      return logs;
    },
    async invoke<T>(event: unknown, remainingMs = 60_000): Promise<T> {
      const answer = new Promise<string>((resolve) => waiting.push(resolve));
      child.stdin?.write(`${JSON.stringify({ event, remainingMs })}\n`);
      const parsed = JSON.parse(await Promise.race([answer, exited])) as {
        result?: T;
        error?: string;
      };
      if (parsed.error !== undefined) throw new Error(`the handler threw: ${parsed.error}`);
      return parsed.result as T;
    },
    stop() {
      child.stdin?.end();
      child.kill();
    },
  };
}

let emulator: LocalEmulator;
let outdir: string;
let bundleFile: string;

beforeAll(async () => {
  outdir = mkdtempSync(join(tmpdir(), "vip-allocator-bundle-run-"));
  const [engine, bundle] = await Promise.all([startTestEngine(), buildAllocatorBundle(outdir)]);
  emulator = engine;
  expect(bundle.errors).toEqual([]);
  bundleFile = bundle.outfile;
});

afterAll(async () => {
  await emulator?.stop();
  if (outdir !== undefined) rmSync(outdir, { recursive: true, force: true });
});

async function vipsOf(client: DynamoDBClient, tables: TableNames, mesh: string) {
  const doc = new DynamoItemClient(client);
  const item = await doc.get({ TableName: tables.vips, Key: { mesh }, ConsistentRead: true });
  return item === undefined ? undefined : decodeVipItem(item);
}

describe("the allocator bundle, built as the construct builds it, run in a process of its own", {
  timeout: 120_000,
}, () => {
  it("allocates from stream batches, then a sweep repairs what no batch delivered", async () => {
    // Arrange: fresh tables, the function's environment, a mesh with two services
    const env = {
      ...prefixedTableEnv(`bundle${process.pid}`),
      DYNAMODB_ENDPOINT: emulator.endpoint,
    };
    const tables = resolveTableNames(env);
    const client = new DynamoDBClient({
      endpoint: emulator.endpoint,
      region: "us-east-1",
      credentials: CREDENTIALS,
    });
    await createTables(client, tables);
    const doc = new DynamoItemClient(client);
    await doc.put({ TableName: tables.meshes, Item: { name: "default" } });
    for (const item of [
      dataplane("default", "dp-1", ["web"]),
      dataplane("default", "dp-2", ["api"]),
    ]) {
      await doc.put({
        TableName: tables.dataplanes,
        Item: item as unknown as Record<string, unknown>,
      });
    }
    const fn = startFunction(bundleFile, env);
    const responses: DynamoDBBatchResponse[] = [];
    const poller = new StreamPoller({
      endpoint: emulator.endpoint,
      region: "us-east-1",
      credentials: CREDENTIALS,
      tables,
      handler: async (event) => {
        const response = await fn.invoke<DynamoDBBatchResponse>(event);
        responses.push(response);
        return response;
      },
      failureFile: join(outdir, "failures.jsonl"),
    });

    try {
      // Act 1: the streams' batches through the bundle's handler
      const report = await poller.drain();

      // Assert 1
      expect(report.failedToDestination).toBe(0);
      expect(report.records).toBe(3);
      expect(responses.length).toBeGreaterThan(0);
      expect(responses.every((r) => r.batchItemFailures.length === 0)).toBe(true);
      const first = await vipsOf(client, tables, "default");
      expect(Object.keys(first?.vips ?? {}).sort()).toEqual(["api", "web"]);

      // Act 2: a dataplane whose record no batch delivers (as if lost), then the scheduled
      // sweep's event
      await doc.put({
        TableName: tables.dataplanes,
        Item: dataplane("default", "dp-3", ["db"]) as unknown as Record<string, unknown>,
      });
      const summary = await fn.invoke<SweepSummary>({ vipAllocator: "sweep" });

      // Assert 2
      expect(summary).toMatchObject({ finished: true, meshes: 1 });
      expect(summary.repairs).toBeGreaterThan(0);
      const repaired = await vipsOf(client, tables, "default");
      expect(Object.keys(repaired?.vips ?? {}).sort()).toEqual(["api", "db", "web"]);
      expect(repaired?.vips.web).toBe(first?.vips.web);
    } finally {
      poller.destroy();
      fn.stop();
      client.destroy();
    }
  });
});
