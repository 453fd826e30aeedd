/**
 * What one dataplane event costs, incremental (the membership index) against the full
 * recompute (the batch step without the index: every touched mesh passed over the tables), on the local engine (VIPS_EMULATOR) with the real handler and adapters.
 *
 * For each size N: one mesh of N dataplanes (10 per service) plus four meshes of 10. The tables
 * and the index are written directly (bench/seed-tables.ts) and every mesh gets its item from a
 * mesh record (not metered); then the same mix of 200 events (a tag change that is not the service, a new
 * dataplane of an existing service, a dataplane with a new service, a delete) is applied to the
 * dataplanes table and delivered to the handler, one record per invocation and in batches of
 * 100. A cost meter on the handler's client counts requests and capacity units from item sizes
 * as DynamoDB bills them (bench/cost-meter.ts). Results: bench/results/event-cost.{md,json,svg}.
 *
 *   npm run bench [-- 100,1000,10000 [FULL_UP_TO]]
 *   BENCH_NAME=event-cost-100000 npm run bench -- 100000 0   # results under another name
 */

import { loadavg } from "node:os";
import { DeleteTableCommand, DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from "aws-lambda";
import { processBatch } from "../functions/allocator/batch/process-batch.ts";
import { type AllocatorConfig, loadConfig } from "../functions/allocator/config.ts";
import { createStreamHandler } from "../functions/allocator/handlers.ts";
import { createRuntime } from "../functions/allocator/runtime.ts";
import { VipPool } from "../functions/domain/pool.ts";
import { toPlain } from "../functions/store/attribute-values.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../functions/store/vip-item-codec.ts";
import { type DataplaneItem, dataplaneRecord, meshRecord } from "../test/fixtures/builders.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { invariantViolations } from "../test/fixtures/invariants.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, ENGINE_NAMES, startEmulator } from "../tools/local/emulator.ts";
import { add, emptyTotals } from "./capacity-units.ts";
import { CostMeter } from "./cost-meter.ts";
import { type KindCost, type Row, report } from "./event-cost-report.ts";
import { kubernetesDataplane as dataplane } from "./kubernetes-dataplane.ts";
import { seedTables } from "./seed-tables.ts";

const SIZES = (process.argv[2] ?? "100,1000,10000").split(",").map(Number);
const MODES = ["index", "tables"] as const;
/** The full recompute runs only up to this many dataplanes (third argument; default: all). */
const FULL_UP_TO = Number(process.argv[3] ?? Number.POSITIVE_INFINITY);
const DELIVERIES = ["single", "batch100"] as const;

const EVENTS = 200;
const KINDS = ["tag-change", "new-dataplane", "new-service", "delete"] as const;
type Kind = (typeof KINDS)[number];
const SMALL_MESHES = ["small-1", "small-2", "small-3", "small-4"];
/** The full recompute one record per invocation reads the whole mesh and table per event. */
const fullSingleEvents = (n: number) => (n <= 100 ? EVENTS : n <= 1000 ? 40 : 8);

type Mode = (typeof MODES)[number];

type Delivery = (typeof DELIVERIES)[number];

/**
 * From this size on, each configuration runs on an engine of its own: DynamoDB Local keeps
 * what it stored (dropped tables included) in one in-memory database, and writes into it slow
 * down as it fills.
 */
const FRESH_ENGINE_FROM = 50_000;

let emulator = await startEmulator();
const ENGINE_LABEL = ENGINE_LABELS[emulator.engine];
console.error(`engine: ${ENGINE_LABEL}`);
let raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
let doc = new DynamoItemClient(raw);
const rows: Row[] = [];
let run = 0;

/** A new engine (and clients) in place of the current one. */
async function freshEngine(): Promise<void> {
  raw.destroy();
  await emulator.stop();
  emulator = await startEmulator();
  raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  doc = new DynamoItemClient(raw);
}

try {
  for (const n of SIZES) {
    for (const mode of MODES) {
      if (mode === "tables" && n > FULL_UP_TO) continue;
      for (const delivery of DELIVERIES) {
        if (n >= FRESH_ENGINE_FROM && run > 0) await freshEngine();
        rows.push(await measure(n, mode, delivery));
        const row = rows[rows.length - 1] as Row;
        console.error(
          `${n} ${mode} ${delivery}: ${row.events} events, ${(row.readUnitsPerEvent + row.writeUnitsPerEvent).toFixed(2)} units/event, ${row.wallSecondsPerEvent.toFixed(3)} s/event`,
        );
      }
    }
  }
} finally {
  raw.destroy();
  await emulator.stop();
}
report(rows, {
  engineLabel: ENGINE_LABEL,
  engineName: ENGINE_NAMES[emulator.engine],
  sizes: SIZES,
  fullUpTo: FULL_UP_TO,
  fullSingleEvents,
});

async function measure(n: number, mode: Mode, delivery: Delivery): Promise<Row> {
  run++;
  const prefix = `bench${run}`;
  const env = {
    ...prefixedTableEnv(prefix),
    DYNAMODB_ENDPOINT: emulator.endpoint,
  };
  const config = loadConfig(env);
  const tables = config.tables;
  await createTables(raw, tables);

  // Seed: the tables as a control plane left them.
  const meshes = ["big", ...SMALL_MESHES];
  const seeded: DataplaneItem[] = [];
  for (let i = 0; i < n; i++) seeded.push(dataplane("big", `dp-${i}`, `svc-${Math.floor(i / 10)}`));
  for (const [m, mesh] of SMALL_MESHES.entries()) {
    for (let i = 0; i < 10; i++) {
      seeded.push(dataplane(mesh, `dp-${i}`, i < 3 ? `svc-${i}` : `small-${m}-${i}`));
    }
  }
  // The tables and (incremental) the index written directly, not metered, then a record per
  // mesh gives each its item.
  const seed = await seedTables(
    doc,
    tables,
    { meshes, dataplanes: seeded },
    { index: mode === "index" },
  );
  const setupStart = performance.now();
  const setup = handlerFor(mode, config, raw);
  await deliverAll(
    setup,
    meshes.map((mesh) => meshRecord(tables.meshes, mesh)),
  );
  console.error(
    `${n} ${mode} ${delivery}: seeded ${seed.dataplanes} dataplanes and ${seed.indexItems} index items in ${seed.seconds.toFixed(1)} s, first passes ${((performance.now() - setupStart) / 1000).toFixed(1)} s (load ${loadavg()[0]?.toFixed(2)})`,
  );

  const count = mode === "tables" && delivery === "single" ? fullSingleEvents(n) : EVENTS;
  /** Changes are made just before their records are delivered, as they would happen. */
  const deliver = async (
    handler: ReturnType<typeof createStreamHandler>,
    events: readonly MixEvent[],
  ): Promise<void> => {
    const size = delivery === "single" ? 1 : 100;
    for (let i = 0; i < events.length; i += size) {
      const batch = events.slice(i, i + size);
      for (const event of batch) await event.apply();
      await deliverAll(
        handler,
        batch.map((event) => event.record),
      );
    }
  };

  // Timed, unmetered (the meter's own side reads would count as wall time); the control
  // plane's writes are timed out.
  const timed = mix(tables.dataplanes, n, count, `${run}a`, 0);
  const plain = handlerFor(mode, config, raw);
  let wallMs = 0;
  await deliver(async (event) => {
    const start = performance.now();
    try {
      return await plain(event);
    } finally {
      wallMs += performance.now() - start;
    }
  }, timed);

  // Metered: the same kinds of events on other dataplanes of the same tables.
  const metered = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const meter = new CostMeter(raw);
  meter.install(metered);
  const handler = handlerFor(mode, config, metered);
  const events = mix(tables.dataplanes, n, count, `${run}b`, Math.ceil(count / 4));
  // Each kind delivered and metered on its own (in the mix's order within the kind).
  const kinds: KindCost[] = [];
  const totals = emptyTotals();
  let guardReadUnits = 0;
  let batches = 0;
  for (const kind of KINDS) {
    const ofKind = events.filter((event) => event.kind === kind);
    if (ofKind.length === 0) continue;
    meter.reset();
    await deliver(handler, ofKind);
    const cost = meter.snapshot();
    batches += Math.ceil(ofKind.length / (delivery === "single" ? 1 : 100));
    // The pass guard (decision 055): the waiting item and the touched meshes' range records.
    for (const prefix of ["range", "waiting"]) {
      guardReadUnits += cost.byKeyPrefix.get(`${tables.claims} ${prefix}`)?.readUnits ?? 0;
    }
    totals.requests += cost.requests;
    totals.readUnits += cost.readUnits;
    totals.writeUnits += cost.writeUnits;
    for (const [table, c] of cost.byTable) add(totals.byTable, table, c);
    for (const [prefix, c] of cost.byKeyPrefix) add(totals.byKeyPrefix, prefix, c);
    const item = cost.byTable.get(tables.vips);
    kinds.push({
      kind,
      setChanging: kind === "new-service",
      events: ofKind.length,
      readUnitsPerEvent: cost.readUnits / ofKind.length,
      writeUnitsPerEvent: cost.writeUnits / ofKind.length,
      itemReadUnitsPerEvent: (item?.readUnits ?? 0) / ofKind.length,
      itemWriteUnitsPerEvent: (item?.writeUnits ?? 0) / ofKind.length,
    });
  }
  metered.destroy();
  await checkInvariants(tables, meshes);
  // DynamoDB Local holds every table (and its stream records) in memory: drop this run's.
  for (const table of Object.values(tables)) {
    if (table !== undefined) await raw.send(new DeleteTableCommand({ TableName: table }));
  }

  const newServices = events.filter((event) => event.kind === "new-service").length;
  const claims = [...totals.byKeyPrefix]
    .filter(([key]) => key === `${tables.claims} addr` || key === `${tables.claims} pool`)
    .reduce((sum, [, cost]) => sum + cost.readUnits, 0);
  return {
    dataplanes: n,
    mode,
    delivery,
    events: count,
    requestsPerEvent: totals.requests / count,
    readUnitsPerEvent: totals.readUnits / count,
    writeUnitsPerEvent: totals.writeUnits / count,
    itemWriteUnitsPerEvent: (totals.byTable.get(tables.vips)?.writeUnits ?? 0) / count,
    itemReadUnitsPerEvent: (totals.byTable.get(tables.vips)?.readUnits ?? 0) / count,
    kinds,
    addressSearchReadUnitsPerNewService: newServices === 0 ? 0 : claims / newServices,
    guardReadUnitsPerBatch: batches === 0 ? 0 : guardReadUnits / batches,
    wallSecondsPerEvent: wallMs / 1000 / count,
  };
}

async function deliverAll(
  handler: ReturnType<typeof createStreamHandler>,
  records: DynamoDBRecord[],
): Promise<void> {
  const response = await handler({ Records: records });
  if (response.batchItemFailures.length > 0) {
    throw new Error(`the handler reported failures: ${JSON.stringify(response.batchItemFailures)}`);
  }
}

interface MixEvent {
  readonly kind: Kind;
  /** Makes the change in the dataplanes table (the control plane's write, not metered). */
  readonly apply: () => Promise<unknown>;
  readonly record: DynamoDBRecord;
}

/** The mix's events: each change to the dataplanes table and its stream record. */
function mix(table: string, n: number, count: number, runId: string, offset: number): MixEvent[] {
  const kinds = KINDS;
  const services = Math.max(1, Math.floor(n / 10));
  const out: MixEvent[] = [];
  for (let i = 0; i < count; i++) {
    const kind = kinds[i % 4] as Kind;
    const k = Math.floor(i / 4);
    const j = k + offset;
    if (kind === "tag-change") {
      // Instances 0-4 of the services from the front; deletes take instances 9 down to 5, so
      // every service keeps instances and a delete changes no service set.
      const index = (10 * Math.floor(j / 5) + (j % 5)) % n;
      const old = dataplane("big", `dp-${index}`, `svc-${Math.floor(index / 10)}`);
      const next = dataplane(
        "big",
        `dp-${index}`,
        `svc-${Math.floor(index / 10)}`,
        `v${runId}-${k}`,
      );
      out.push({
        kind,
        apply: () => doc.put({ TableName: table, Item: next }),
        record: dataplaneRecord(table, { oldImage: old, newImage: next }),
      });
    } else if (kind === "new-dataplane") {
      const item = dataplane("big", `extra-${runId}-${k}`, `svc-${(k * 7) % services}`);
      out.push({
        kind,
        apply: () => doc.put({ TableName: table, Item: item }),
        record: dataplaneRecord(table, { newImage: item }),
      });
    } else if (kind === "new-service") {
      const item = dataplane("big", `new-${runId}-${k}`, `new-svc-${runId}-${k}`);
      out.push({
        kind,
        apply: () => doc.put({ TableName: table, Item: item }),
        record: dataplaneRecord(table, { newImage: item }),
      });
    } else {
      const index = Math.min(n - 1, 10 * (j % services) + 9 - (Math.floor(j / services) % 5));
      const old = dataplane("big", `dp-${index}`, `svc-${Math.floor(index / 10)}`);
      out.push({
        kind,
        apply: () => doc.delete({ TableName: table, Key: { mesh: "big", name: `dp-${index}` } }),
        record: dataplaneRecord(table, { oldImage: old }),
      });
    }
  }
  return out;
}

async function checkInvariants(
  tables: ReturnType<typeof loadConfig>["tables"],
  meshes: string[],
): Promise<void> {
  const items = [];
  for await (const page of paginateScan({ client: raw }, { TableName: tables.vips })) {
    for (const item of page.Items ?? []) items.push(decodeAllocatorItem(toPlain(item)));
  }
  const violations = invariantViolations({
    items,
    meshes: new Set(meshes),
    pool: VipPool.parse("240.0.0.0/4"),
  });
  if (violations.length > 0)
    throw new Error(`invariants broken: ${violations.slice(0, 5).join("; ")}`);
}

/**
 * The function's handler (the index), or the alternative it replaced: the batch step without
 * the index, so every touched mesh is passed over the tables (the full recompute; no longer a
 * setting of the function, decision 154).
 */
function handlerFor(
  mode: Mode,
  config: AllocatorConfig,
  client: DynamoDBClient,
): (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse> {
  const telemetry = new InMemoryTelemetry();
  if (mode === "index") return createStreamHandler(config, { client, telemetry });
  const runtime = createRuntime(config, { client });
  const { index: _index, ...ports } = runtime.ports;
  const settings = { ...runtime.settings, tables: config.tables, concurrency: 4 };
  return (event) => processBatch(event, { ...ports, telemetry }, settings);
}
