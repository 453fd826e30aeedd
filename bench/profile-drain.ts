/**
 * Where the time of a drain goes (not a test): seeds meshes and dataplanes on a fresh
 * local engine (VIPS_EMULATOR), drains in-process with the real handler, and prints, per DynamoDB operation,
 * how many requests the allocator made and their total latency.
 *
 *   npx tsx bench/profile-drain.ts [DATAPLANES] [MESHES]
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { loadConfig } from "../functions/allocator/config.ts";
import { createStreamHandler } from "../functions/allocator/handlers.ts";
import type { Telemetry } from "../functions/allocator/telemetry.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { StreamPoller } from "../tools/local/poller.ts";

const dataplaneCount = Number(process.argv[2] ?? 1000);
const meshCount = Number(process.argv[3] ?? 10);
const servicesPerMesh = 20;

const emulator = await startEmulator();
const ENGINE_LABEL = ENGINE_LABELS[emulator.engine];
console.error(`engine: ${ENGINE_LABEL}`);
try {
  const config = loadConfig({ DYNAMODB_ENDPOINT: emulator.endpoint });
  const client = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const stats = new Map<string, { count: number; ms: number }>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const started = performance.now();
      try {
        return await next(args);
      } finally {
        const name = String(context.commandName).replace(/Command$/, "");
        const entry = stats.get(name) ?? { count: 0, ms: 0 };
        entry.count += 1;
        entry.ms += performance.now() - started;
        stats.set(name, entry);
      }
    },
    { step: "initialize", name: "profile" },
  );
  const doc = new DynamoItemClient(client);
  await createTables(client, config.tables);
  const meshes = Array.from({ length: meshCount }, (_, i) => ({ name: `mesh-${i}` }));
  const dataplanes = Array.from({ length: dataplaneCount }, (_, i) => {
    const mesh = i % meshCount;
    const index = Math.floor(i / meshCount) % servicesPerMesh;
    const service = index < 5 ? `svc-shared-${index}` : `svc-${mesh}-${index}`;
    return {
      mesh: `mesh-${mesh}`,
      name: `dp-${i}`,
      networking: {
        address: "10.0.0.1",
        inbound: [{ port: 8080, tags: { "kuma.io/service": service } }],
      },
    };
  });
  for (const [table, items] of [
    [config.tables.meshes, meshes],
    [config.tables.dataplanes, dataplanes],
  ] as const) {
    await doc.batchWrite(
      table,
      items.map((item) => ({ put: item })),
    );
  }
  stats.clear();
  const quiet: Telemetry = {
    metric() {},
    repair() {},
    badInput() {},
    info() {},
    warn() {},
    error() {},
  };
  const handler = createStreamHandler(config, { client, telemetry: quiet });
  const poller = new StreamPoller({ endpoint: emulator.endpoint, tables: config.tables, handler });
  const started = performance.now();
  const report = await poller.drain();
  const seconds = (performance.now() - started) / 1000;
  poller.destroy();
  console.log(
    `${dataplaneCount} dataplanes, ${meshCount} meshes: ${report.records} records, ` +
      `${report.invocations} invocations, ${seconds.toFixed(1)} s`,
  );
  const rows = [...stats.entries()].sort((a, b) => b[1].ms - a[1].ms);
  for (const [name, { count, ms }] of rows) {
    console.log(
      `  ${name.padEnd(16)} ${String(count).padStart(6)} requests ${(ms / 1000).toFixed(2).padStart(7)} s`,
    );
  }
  client.destroy();
} finally {
  await emulator.stop();
}
