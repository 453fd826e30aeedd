/**
 * What a lost race costs, with the item a failed condition found returned by the write itself
 * (`ReturnValuesOnConditionCheckFailure: ALL_OLD`, the default) against reading it again (the
 * store's fallback, `returnOnConditionFailure: false`), on the local engine (VIPS_EMULATOR) with
 * the real handler and adapters.
 *
 * For each mesh size S (services, one dataplane each): the mesh is seeded and passed (not
 * metered); then ROUNDS rounds each deliver CONCURRENT records at once, one per invocation, each
 * a dataplane of a new service, so the invocations race on the mesh's one item. The same rounds
 * run on fresh tables for both variants. A cost meter (bench/cost-meter.ts) counts requests and
 * capacity units as DynamoDB bills them. Results: bench/results/condition-returns.{md,json,svg}.
 *
 *   npm run bench:conditions [-- 100,2000,10000]
 */

import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { loadConfig } from "../functions/allocator/config.ts";
import { createStreamHandler, type StreamHandler } from "../functions/allocator/handlers.ts";
import { rebuildIndex } from "../functions/allocator/membership-index/rebuild.ts";
import { METRIC } from "../functions/allocator/telemetry-names.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { DynamoMembershipIndex } from "../functions/store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../functions/store/dynamo-mesh-source.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { dataplaneRecord, meshRecord } from "../test/fixtures/builders.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { CostMeter } from "./cost-meter.ts";
import { kubernetesDataplane as dataplane } from "./kubernetes-dataplane.ts";
import { renderChart } from "./svg-chart.ts";

const SIZES = (process.argv[2] ?? "100,2000,10000").split(",").map(Number);
const VARIANTS = ["returned", "re-read"] as const;
const ROUNDS = 10;
const CONCURRENT = 8;

type Variant = (typeof VARIANTS)[number];

interface Row {
  services: number;
  variant: Variant;
  events: number;
  conflicts: number;
  /** Records delivered again after the handler reported them failed (Lambda's retry). */
  redeliveries: number;
  itemReads: number;
  itemReadUnits: number;
  /** Single-item claim writes whose condition failed (a join or a leave that lost). */
  claimConditionFailures: number;
  claimReads: number;
  requests: number;
  readUnits: number;
  writeUnits: number;
  wallMs: number;
}

const emulator = await startEmulator();
console.error(`engine: ${ENGINE_LABELS[emulator.engine]}`);
const raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
const doc = new DynamoItemClient(raw);
const rows: Row[] = [];
let run = 0;
try {
  for (const services of SIZES) {
    for (const variant of VARIANTS) {
      const row = await measure(services, variant);
      rows.push(row);
      console.error(
        `${services} services, ${variant}: ${row.conflicts} conflicts, ${row.itemReads} item reads (${row.itemReadUnits} RCU), ${(row.readUnits + row.writeUnits).toFixed(1)} units`,
      );
    }
  }
} finally {
  raw.destroy();
  await emulator.stop();
}
report(rows);

async function measure(services: number, variant: Variant): Promise<Row> {
  run++;
  const env = { ...prefixedTableEnv(`cond${run}`), DYNAMODB_ENDPOINT: emulator.endpoint };
  const config = loadConfig(env);
  const { tables } = config;
  await createTables(raw, tables);
  await doc.batchWrite(tables.meshes, [{ put: { name: "big" } }]);
  await doc.batchWrite(
    tables.dataplanes,
    Array.from({ length: services }, (_, i) => ({ put: dataplane("big", `dp-${i}`, `svc-${i}`) })),
  );
  await rebuildIndex(
    new DynamoMeshSource(raw, tables),
    new DynamoMembershipIndex(doc, tables.index),
  );
  const setup = createStreamHandler(config, { client: raw, telemetry: new InMemoryTelemetry() });
  await deliver(setup, [meshRecord(tables.meshes, "big")]);

  const metered = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const meter = new CostMeter(raw);
  meter.install(metered);
  let itemReads = 0;
  let claimConditionFailures = 0;
  metered.middlewareStack.add(
    (next, context) => async (args) => {
      const table = (args.input as { TableName?: string }).TableName;
      if (context.commandName === "GetItemCommand" && table === tables.vips) itemReads++;
      try {
        return await next(args);
      } catch (error) {
        if (
          table === tables.claims &&
          (error as Error).name === "ConditionalCheckFailedException"
        ) {
          claimConditionFailures++;
        }
        throw error;
      }
    },
    { step: "initialize", name: "countItemReads" },
  );
  const telemetry = new InMemoryTelemetry();
  const handler = createStreamHandler(config, {
    client: metered,
    telemetry,
    itemClient: { returnOnConditionFailure: variant === "returned" },
  });
  let wallMs = 0;
  let redeliveries = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const items = Array.from({ length: CONCURRENT }, (_, k) =>
      dataplane("big", `new-${round}-${k}`, `new-svc-${round}-${k}`),
    );
    await doc.batchWrite(
      tables.dataplanes,
      items.map((item) => ({ put: item })),
    );
    const start = performance.now();
    const retries = await Promise.all(
      items.map((item) =>
        deliverUntilDone(handler, dataplaneRecord(tables.dataplanes, { newImage: item })),
      ),
    );
    redeliveries += retries.reduce((a, b) => a + b, 0);
    wallMs += performance.now() - start;
  }
  const totals = meter.snapshot();
  metered.destroy();
  const vips = totals.byTable.get(tables.vips);
  return {
    services,
    variant,
    events: ROUNDS * CONCURRENT,
    conflicts: telemetry.total(METRIC.conflicts),
    redeliveries,
    itemReads,
    itemReadUnits: vips?.readUnits ?? 0,
    claimConditionFailures,
    claimReads: totals.byOperation.get("BatchGetItemCommand") ?? 0,
    requests: totals.requests,
    readUnits: totals.readUnits,
    writeUnits: totals.writeUnits,
    wallMs,
  };
}

async function deliver(handler: StreamHandler, records: DynamoDBRecord[]): Promise<void> {
  const response = await handler({ Records: records });
  if (response.batchItemFailures.length > 0) {
    throw new Error(`the handler reported failures: ${JSON.stringify(response.batchItemFailures)}`);
  }
}

/** Delivers until the handler succeeds, as Lambda retries a failed batch; the retries. */
async function deliverUntilDone(handler: StreamHandler, record: DynamoDBRecord): Promise<number> {
  for (let retries = 0; retries < 20; retries++) {
    const response = await handler({ Records: [record] });
    if (response.batchItemFailures.length === 0) return retries;
  }
  throw new Error("a record still failed after 20 deliveries");
}

function report(all: readonly Row[]): void {
  mkdirSync("bench/results", { recursive: true });
  writeFileSync("bench/results/condition-returns.json", `${JSON.stringify(all, null, 2)}\n`);
  const lines = [
    "# A lost race: the item returned by the failed write, or read again",
    "",
    `Engine: ${ENGINE_LABELS[emulator.engine]}; ${cpus().length} vCPUs; ${ROUNDS} rounds of ${CONCURRENT} concurrent invocations, one new-service record each, on one mesh; units as DynamoDB bills them (bench/cost-meter.ts). \`npm run bench:conditions\`.`,
    "",
    "| services | variant | events | conflicts | redeliveries | item GetItems | item read units | lost claim writes | claim BatchGets | requests | read units | write units | wall s |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const row of all) {
    lines.push(
      `| ${row.services.toLocaleString("en-US")} | ${row.variant} | ${row.events} | ${row.conflicts} | ${row.redeliveries} | ${row.itemReads} | ${row.itemReadUnits} | ${row.claimConditionFailures} | ${row.claimReads} | ${row.requests} | ${row.readUnits.toFixed(1)} | ${row.writeUnits.toFixed(1)} | ${(row.wallMs / 1000).toFixed(2)} |`,
    );
  }
  lines.push(
    "",
    "The races are real: timing decides who loses, so conflicts and units vary from run to run. In both variants the pass reads the item again after a lost item write (decision 054); the variants differ only where a claim write loses (the lost claim writes column) or a deleted mesh's delete loses.",
    "",
    "![item read units](condition-returns.svg)",
    "",
  );
  writeFileSync("bench/results/condition-returns.md", lines.join("\n"));
  writeFileSync(
    "bench/results/condition-returns.svg",
    renderChart({
      title: "VIP item read units in contended passes",
      xLabel: "services in the mesh",
      yLabel: "item read units per event",
      series: VARIANTS.map((variant) => ({
        name: variant,
        points: all
          .filter((r) => r.variant === variant)
          .map((r) => ({ x: r.services, y: r.itemReadUnits / r.events })),
      })),
    }),
  );
}
