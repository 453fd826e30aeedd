/**
 * A restart storm on one mesh, on the local engine (VIPS_EMULATOR) with the real handler and
 * adapters: one mesh of N dataplanes (10 per service); every dataplane is restarted as
 * Kubernetes does it (the pod deleted, a pod with a new name inserted), and 2% of N more
 * records insert dataplanes of new services. A producer writes the changes to the dataplanes
 * table as fast as the engine takes them and publishes each one's stream record to one of C
 * queues (by item, so an item's records stay in order); C workers stand for C concurrent
 * invocations, each taking up to 100 records at a time and retrying from the reported record,
 * as Lambda does. The mesh's dataplanes share a partition key, so AWS delivers them from one
 * shard: C = 1 is that shard in order (parallelization factor 1, the default), C = 10 the
 * factor 10 with order kept per item. Measured per C: records per second,
 * version conflicts and mesh failures per item write, the lag from a record's write to the end
 * of the invocation that completed it (its mesh's item includes it by then), and, on a metered
 * run, capacity units per record (bench/cost-meter.ts). Results: bench/results/storm.{md,json,svg}.
 *
 *   npm run bench:storm [-- 10000 [1,10 [--no-meter]]]
 *   BENCH_NAME=storm-10000 (default storm): the results' base name
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { loadConfig } from "../functions/allocator/config.ts";
import { createStreamHandler } from "../functions/allocator/handlers.ts";
import { METRIC } from "../functions/allocator/telemetry-names.ts";
import { VipPool } from "../functions/domain/pool.ts";
import { deriveServiceSet } from "../functions/domain/service-set.ts";
import { toPlain } from "../functions/store/attribute-values.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { decodeVipItem } from "../functions/store/vip-item-codec.ts";
import { type DataplaneItem, dataplaneRecord, meshRecord } from "../test/fixtures/builders.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { invariantViolations } from "../test/fixtures/invariants.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { CostMeter } from "./cost-meter.ts";
import { kubernetesDataplane as dataplane } from "./kubernetes-dataplane.ts";
import { seedTables } from "./seed-tables.ts";
import { renderChart } from "./svg-chart.ts";

const N = Number(process.argv[2] ?? 10_000);
const LEVELS = (process.argv[3] ?? "1,10").split(",").map(Number);
const NAME = process.env.BENCH_NAME?.trim() || "storm";
/** `--no-meter` (fourth argument): leave out the metered run. */
const METER = process.argv[4] !== "--no-meter";
const BATCH = 100;
const MESH = "big";

interface Row {
  concurrency: number;
  metered: boolean;
  records: number;
  seconds: number;
  recordsPerSecond: number;
  invocations: number;
  itemWrites: number;
  conflicts: number;
  conflictsPerItemWrite: number;
  meshFailures: number;
  retriedBatches: number;
  passesSkipped: number;
  lagP50Ms: number;
  lagP99Ms: number;
  readUnitsPerRecord?: number;
  writeUnitsPerRecord?: number;
  itemReadUnitsPerRecord?: number;
  itemWriteUnitsPerRecord?: number;
}

const emulator = await startEmulator();
const ENGINE = ENGINE_LABELS[emulator.engine];
console.error(`engine: ${ENGINE}`);
const raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
const doc = new DynamoItemClient(raw);
const config = loadConfig({ ...prefixedTableEnv("storm"), DYNAMODB_ENDPOINT: emulator.endpoint });
const tables = config.tables;
const rows: Row[] = [];
/** The dataplanes as they are now, by service (what the next restart replaces). */
let live: DataplaneItem[] = [];
const serviceOf = new Map<string, string>();
let setupSeconds = 0;

try {
  const started = performance.now();
  await createTables(raw, tables);
  for (let i = 0; i < N; i++) {
    live.push(dataplane(MESH, `dp-${i}`, `svc-${Math.floor(i / 10)}`));
    serviceOf.set(`dp-${i}`, `svc-${Math.floor(i / 10)}`);
  }
  // The tables and the index written directly (bench/seed-tables.ts).
  await seedTables(doc, tables, { meshes: [MESH], dataplanes: live }, { index: true });
  const setup = createStreamHandler(config, { client: raw, telemetry: new InMemoryTelemetry() });
  await setup({ Records: [meshRecord(tables.meshes, MESH)] });
  setupSeconds = (performance.now() - started) / 1000;
  console.error(`setup: ${N} dataplanes, index and item in ${setupSeconds.toFixed(1)} s`);
  const runs = [
    ...LEVELS.map((c) => ({ c, metered: false })),
    ...(METER ? [{ c: Math.max(...LEVELS), metered: true }] : []),
  ];
  for (const [round, { c, metered }] of runs.entries()) {
    const row = await storm(c, metered, round + 1);
    rows.push(row);
    console.error(JSON.stringify(row));
    await checkCoverage();
  }
} finally {
  raw.destroy();
  await emulator.stop();
}
report(rows);

interface Published {
  readonly record: DynamoDBRecord;
  readonly writtenAt: number;
}

async function storm(concurrency: number, metered: boolean, round: number): Promise<Row> {
  const client = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const meter = metered ? new CostMeter(raw) : undefined;
  meter?.install(client);
  const telemetry = new InMemoryTelemetry();
  const handler = createStreamHandler(config, { client, telemetry });
  const queues: Published[][] = Array.from({ length: concurrency }, () => []);
  let producing = true;
  // Sequence numbers increase from one record to the next (test/fixtures/builders.ts).
  const record = (old: DataplaneItem | undefined, next: DataplaneItem | undefined) =>
    dataplaneRecord(tables.dataplanes, {
      ...(old !== undefined ? { oldImage: old } : {}),
      ...(next !== undefined ? { newImage: next } : {}),
    });
  const queueOf = (name: string) => queues[hash(name) % concurrency] as Published[];

  // The control plane: each pod deleted, its replacement inserted; every 50th change also a
  // dataplane of a new service (2% of N).
  const restarted: DataplaneItem[] = [];
  const producer = async () => {
    const order = [...live].sort((a, b) => hash(a.name) - hash(b.name));
    for (let i = 0; i < order.length; i += 25) {
      const chunk = order.slice(i, i + 25);
      const writes: Array<{ op: "put" | "delete"; item: DataplaneItem; old?: DataplaneItem }> = [];
      for (const [j, old] of chunk.entries()) {
        const service = serviceOf.get(old.name) as string;
        const base = old.name.replace(/-r\d+$/, "");
        const next = dataplane(MESH, `${base}-r${round}`, service, `v${round}`);
        writes.push({ op: "delete", item: old }, { op: "put", item: next });
        restarted.push(next);
        serviceOf.set(next.name, service);
        if ((i + j) % 50 === 49) {
          const fresh = dataplane(MESH, `new-${round}-${i + j}`, `new-svc-${round}-${i + j}`);
          writes.push({ op: "put", item: fresh });
          restarted.push(fresh);
          serviceOf.set(fresh.name, `new-svc-${round}-${i + j}`);
        }
      }
      for (let k = 0; k < writes.length; k += 25) {
        const slice = writes.slice(k, k + 25);
        await doc.batchWrite(
          tables.dataplanes,
          slice.map((w) =>
            w.op === "put" ? { put: w.item } : { delete: { mesh: w.item.mesh, name: w.item.name } },
          ),
        );
        const writtenAt = performance.now();
        for (const w of slice) {
          queueOf(w.item.name).push({
            record: w.op === "put" ? record(undefined, w.item) : record(w.item, undefined),
            writtenAt,
          });
        }
      }
    }
    producing = false;
  };

  const lags: number[] = [];
  let invocations = 0;
  let retried = 0;
  const worker = async (queue: Published[]) => {
    while (producing || queue.length > 0) {
      if (queue.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const batch = queue.slice(0, BATCH);
      invocations++;
      const response = await handler({ Records: batch.map((p) => p.record) });
      const failed = response.batchItemFailures[0]?.itemIdentifier;
      const done =
        failed === undefined
          ? batch.length
          : batch.findIndex((p) => p.record.dynamodb?.SequenceNumber === failed);
      if (failed !== undefined) retried++;
      const now = performance.now();
      for (const p of batch.slice(0, done)) lags.push(now - p.writtenAt);
      queue.splice(0, Math.max(0, done));
    }
  };

  const records = live.length * 2 + Math.floor(live.length / 50);
  const start = performance.now();
  await Promise.all([producer(), ...queues.map((queue) => worker(queue))]);
  const seconds = (performance.now() - start) / 1000;
  live = restarted;
  client.destroy();
  lags.sort((a, b) => a - b);
  const itemWrites = telemetry.total(METRIC.meshWrites);
  const conflicts = telemetry.total(METRIC.conflicts);
  const totals = meter?.snapshot();
  const vips = totals?.byTable.get(tables.vips);
  return {
    concurrency,
    metered,
    records: lags.length,
    seconds,
    recordsPerSecond: lags.length / seconds,
    invocations,
    itemWrites,
    conflicts,
    conflictsPerItemWrite: itemWrites === 0 ? 0 : conflicts / itemWrites,
    meshFailures: telemetry.total(METRIC.meshFailures),
    retriedBatches: retried,
    passesSkipped: telemetry.total(METRIC.passesSkipped),
    lagP50Ms: percentile(lags, 0.5),
    lagP99Ms: percentile(lags, 0.99),
    ...(totals !== undefined
      ? {
          readUnitsPerRecord: totals.readUnits / records,
          writeUnitsPerRecord: totals.writeUnits / records,
          itemReadUnitsPerRecord: (vips?.readUnits ?? 0) / records,
          itemWriteUnitsPerRecord: (vips?.writeUnits ?? 0) / records,
        }
      : {}),
  };
}

/** The item lists exactly the service set the dataplanes table gives (coverage), and 2-6 hold. */
async function checkCoverage(): Promise<void> {
  const dataplanes = [];
  for await (const page of paginateScan({ client: raw }, { TableName: tables.dataplanes })) {
    for (const item of page.Items ?? []) {
      const plain = toPlain(item);
      dataplanes.push({ mesh: String(plain.mesh), name: String(plain.name), item: plain });
    }
  }
  const items = [];
  for await (const page of paginateScan({ client: raw }, { TableName: tables.vips })) {
    for (const item of page.Items ?? []) items.push(decodeVipItem(toPlain(item)));
  }
  const expected = new Map([[MESH, deriveServiceSet(MESH, dataplanes, []).services]]);
  const violations = invariantViolations({
    items,
    meshes: new Set([MESH]),
    pool: VipPool.parse("240.0.0.0/4"),
    expected,
  });
  if (violations.length > 0)
    throw new Error(`invariants broken: ${violations.slice(0, 5).join("; ")}`);
}

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0;
  return h;
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] as number;
}

function report(results: Row[]): void {
  const fmt = (value: number | undefined, digits = 2) =>
    value === undefined ? "" : value.toFixed(digits);
  const lines = [
    "| concurrent invocations | metered | records | s | records/s | invocations | item writes | version conflicts | conflicts per item write | mesh failures | retried batches | passes skipped | lag p50 s | lag p99 s | read units/record | write units/record | of which item reads | of which item writes |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...results.map(
      (r) =>
        `| ${r.concurrency} | ${r.metered ? "yes" : "no"} | ${r.records} | ${fmt(r.seconds, 1)} | ${fmt(r.recordsPerSecond, 1)} | ${r.invocations} | ${r.itemWrites} | ${r.conflicts} | ${fmt(r.conflictsPerItemWrite)} | ${r.meshFailures} | ${r.retriedBatches} | ${r.passesSkipped} | ${fmt(r.lagP50Ms / 1000, 1)} | ${fmt(r.lagP99Ms / 1000, 1)} | ${fmt(r.readUnitsPerRecord)} | ${fmt(r.writeUnitsPerRecord)} | ${fmt(r.itemReadUnitsPerRecord)} | ${fmt(r.itemWriteUnitsPerRecord)} |`,
    ),
  ];
  const table = lines.join("\n");
  console.log(table);
  const machine = `${cpus().length} CPUs (${cpus()[0]?.model ?? "unknown"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE}; load average at the end ${loadavg()[0]?.toFixed(1)}`;
  mkdirSync("bench/results", { recursive: true });
  writeFileSync(
    `bench/results/${NAME}.md`,
    [
      `# A restart storm on one mesh of ${N.toLocaleString("en")} dataplanes`,
      "",
      `Run ${new Date().toISOString()} with \`${NAME === "storm" ? "" : `BENCH_NAME=${NAME} `}npm run bench:storm -- ${process.argv.slice(2).join(" ")}\` on ${machine}.`,
      "",
      `One mesh of ${N.toLocaleString("en")} dataplanes (${(N / 10).toLocaleString("en")} services, 10 each; set-up ${setupSeconds.toFixed(0)} s). Each run restarts every`,
      "dataplane (its pod deleted, a pod with a new name inserted: 2 records) and inserts 2% more",
      "dataplanes of new services, written by one producer as fast as the engine takes them and",
      "delivered by the given number of concurrent invocations (records split by item, up to 100",
      "per invocation, a failed batch retried from the reported record): the mesh's dataplanes share",
      "a partition key, so AWS reads them from one shard; 1 invocation is that shard in order",
      "(parallelization factor 1, the default), 10 the factor 10 with order kept per item. Each run restarts what",
      "the run before left. Lag: from a record's write to the end of the invocation that completed",
      "it. Capacity units per record (bench/cost-meter.ts) on the metered run only (the meter's own",
      "side reads slow that run down: its rate and lag are not comparable). After every run the",
      "item is checked against the service set the dataplanes table gives (coverage) and invariants",
      "2-6.",
      "",
      table,
      "",
      `![storm](${NAME}.svg)`,
      "",
    ].join("\n"),
  );
  writeFileSync(`bench/results/${NAME}.json`, `${JSON.stringify(results, null, 2)}\n`);
  const unmetered = results.filter((r) => !r.metered);
  writeFileSync(
    `bench/results/${NAME}.svg`,
    renderChart({
      title: `Restart storm, one mesh of ${N.toLocaleString("en")} dataplanes`,
      xLabel: "concurrent invocations",
      yLabel: "per run",
      series: [
        {
          name: "records/s",
          points: unmetered.map((r) => ({ x: r.concurrency, y: r.recordsPerSecond })),
        },
        {
          name: "item writes",
          points: unmetered.map((r) => ({ x: r.concurrency, y: r.itemWrites })),
        },
        {
          name: "version conflicts",
          points: unmetered.map((r) => ({ x: r.concurrency, y: r.conflicts })),
        },
        {
          name: "lag p99 (s)",
          points: unmetered.map((r) => ({ x: r.concurrency, y: r.lagP99Ms / 1000 })),
        },
      ],
    }),
  );
}
