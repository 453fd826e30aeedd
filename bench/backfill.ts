/**
 * The backfill onto existing tables (issue 32): M meshes of D dataplanes (Kubernetes-sized, 10
 * per service; default 100 meshes of 1,000: 100,000 dataplanes, 10,000 services) written
 * directly before the function exists (no index, no stream record read), then the deployment's
 * one backfill payload to the function in the local runtime with its timeout (default 60 s):
 * the cycle goes on in continuations until it is done (decision 160; a chain ends after 15, and
 * the schedule's next sweep then starts another: played at once here, and counted). Measured: invocations,
 * wall time, timeouts, failures, requests by operation and, with `--metered`, capacity units
 * (bench/cost-meter.ts; its side reads slow the run, so the time of a metered run is not the
 * function's). Every invariant is checked after.
 * Results: bench/results/backfill-N.{md,json,svg}.
 *
 *   npx tsx bench/backfill.ts [MESHES] [DATAPLANES_PER_MESH] [TIMEOUT] [--metered]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { loadConfig } from "../functions/allocator/config.ts";
import { VipPool } from "../functions/domain/pool.ts";
import { toPlain } from "../functions/store/attribute-values.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../functions/store/vip-item-codec.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { invariantViolations } from "../test/fixtures/invariants.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { LocalFunction } from "../tools/local/local-function.ts";
import { CostMeter } from "./cost-meter.ts";
import { kubernetesDataplane } from "./kubernetes-dataplane.ts";
import { RequestCounter } from "./request-counter.ts";
import { seedTables } from "./seed-tables.ts";
import { renderChart } from "./svg-chart.ts";

const args = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));
const METERED = process.argv.includes("--metered");
const MESHES = Number(args[0] ?? 100);
const PER_MESH = Number(args[1] ?? 1000);
const TIMEOUT = Number(args[2] ?? 60);
const TOTAL = MESHES * PER_MESH;

/** The sweep handler's summary lines, each stamped with the wall seconds when it was written. */
class StampedTelemetry extends InMemoryTelemetry {
  since = performance.now();
  readonly endedAt: number[] = [];
  override info(message: string, data?: Record<string, unknown>): void {
    super.info(message, data);
    if (message !== "sweep invocation finished") return;
    this.endedAt.push((performance.now() - this.since) / 1000);
    console.error(`${this.endedAt.at(-1)?.toFixed(0)} s: ${JSON.stringify(data)}`);
  }
}

const emulator = await startEmulator();
console.error(`engine: ${ENGINE_LABELS[emulator.engine]}`);
const raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
const doc = new DynamoItemClient(raw);
try {
  const env = { ...prefixedTableEnv("backfill"), DYNAMODB_ENDPOINT: emulator.endpoint };
  const config = loadConfig(env);
  await createTables(raw, config.tables);
  const meshes = Array.from({ length: MESHES }, (_, m) => `mesh-${String(m).padStart(3, "0")}`);
  const expected = new Map<string, string[]>();
  const dataplanes = meshes.flatMap((mesh) => {
    const services = Array.from({ length: PER_MESH / 10 }, (_, s) => `${mesh}-svc-${s}`);
    expected.set(mesh, services);
    return Array.from({ length: PER_MESH }, (_, d) =>
      kubernetesDataplane(mesh, `dp-${d}`, services[Math.floor(d / 10)] as string),
    );
  });
  const seed = await seedTables(doc, config.tables, { meshes, dataplanes }, { index: false });
  console.error(`seeded ${seed.dataplanes} dataplanes in ${seed.seconds.toFixed(1)} s`);

  const client = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const counter = new RequestCounter();
  counter.install(client);
  const meter = METERED ? new CostMeter(raw) : undefined;
  meter?.install(client);
  const telemetry = new StampedTelemetry();
  const fn = new LocalFunction(config, {
    client,
    timeoutSeconds: TIMEOUT,
    telemetry,
    onNote: (text) => console.error(text),
  });
  const started = performance.now();
  telemetry.since = started;
  fn.invokeAsync({ vipAllocator: "backfill" });
  await fn.idle();
  // A chain of continuations ends after 15 (decision 160); the sweep schedule's next tick then
  // starts a new one: played here at once, and counted.
  let ticks = 0;
  const summaries = () => telemetry.lines.filter((l) => l.message === "sweep invocation finished");
  while (summaries().at(-1)?.data?.finished !== true && ticks < 20) {
    ticks++;
    fn.invokeAsync({ vipAllocator: "sweep" });
    await fn.idle();
  }
  const seconds = (performance.now() - started) / 1000;
  client.destroy();

  const invocations = summaries();
  const last = invocations[invocations.length - 1]?.data ?? {};
  const items = [];
  for await (const page of paginateScan({ client: raw }, { TableName: config.tables.vips })) {
    for (const item of page.Items ?? []) items.push(decodeAllocatorItem(toPlain(item)));
  }
  const violations = invariantViolations({
    items,
    meshes: new Set(meshes),
    pool: VipPool.parse(config.pool.cidr),
    expected,
  });
  if (violations.length > 0) throw new Error(`invariants: ${violations.slice(0, 5).join("; ")}`);
  if (last.finished !== true)
    throw new Error(`the backfill did not finish: ${JSON.stringify(last)}`);
  const cost = meter?.snapshot();
  const result = {
    meshes: MESHES,
    dataplanes: TOTAL,
    services: TOTAL / 10,
    timeoutSeconds: TIMEOUT,
    seedSeconds: seed.seconds,
    seconds,
    invocations: invocations.length,
    continuations: fn.stats.continuations,
    scheduleTicks: ticks,
    timeouts: fn.stats.timeouts,
    failures: telemetry.total("MeshFailures") + fn.stats.continuationErrors,
    requests: counter.total(),
    byOperation: Object.fromEntries(counter.byOperation),
    ...(cost !== undefined ? { readUnits: cost.readUnits, writeUnits: cost.writeUnits } : {}),
    perInvocation: invocations.map((line, i) => ({
      ...line.data,
      endedAtSeconds: telemetry.endedAt[i],
    })),
    load: loadavg(),
  };
  const name = `bench/results/backfill-${TOTAL}${METERED ? "-metered" : ""}`;
  const lines = [
    `# The backfill onto existing tables of ${TOTAL.toLocaleString("en")} dataplanes`,
    "",
    `Run ${new Date().toISOString()} with \`npx tsx bench/backfill.ts ${process.argv.slice(2).join(" ")}\` on ${cpus().length} CPUs (${cpus()[0]?.model ?? "unknown"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE_LABELS[emulator.engine]}; load average at the end ${result.load.map((l) => l.toFixed(1)).join(", ")} (the machine is shared).`,
    "",
    `${MESHES} meshes of ${PER_MESH.toLocaleString("en")} Kubernetes-sized dataplanes (10 per service: ${(TOTAL / 10).toLocaleString("en")} services), written directly in ${seed.seconds.toFixed(0)} s before the function existed; then one \`{"vipAllocator":"backfill"}\` to the function in the local runtime with a ${TIMEOUT} s timeout. The cycle (index from the dataplanes table, a pass per mesh, items, claims) goes on in asynchronous invocations of the function until it is done (decision 160); every invariant holds after.${METERED ? " Metered: capacity units from item sizes; the meter's side reads slow the run, so its time and invocation count are not the function's." : ""}`,
    "",
    "| dataplanes | meshes | services | timeout | invocations | of which schedule ticks (a new chain) | timeouts | failures | wall s | requests | read units | write units |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    `| ${TOTAL} | ${MESHES} | ${TOTAL / 10} | ${TIMEOUT} s | ${result.invocations} | ${ticks} | ${result.timeouts} | ${result.failures} | ${seconds.toFixed(0)} | ${result.requests} | ${cost?.readUnits.toFixed(0) ?? "-"} | ${cost?.writeUnits.toFixed(0) ?? "-"} |`,
    "",
    `Requests by operation: ${counter.describe()}.`,
    "",
    "Per invocation (the sweep handler's summary):",
    "",
    ...result.perInvocation.map((data, i) => `${i + 1}. ${JSON.stringify(data)}`),
    "",
    `![progress](${name.split("/").pop()}.svg)`,
    "",
  ];
  mkdirSync("bench/results", { recursive: true });
  writeFileSync(`${name}.md`, lines.join("\n"));
  writeFileSync(`${name}.json`, `${JSON.stringify(result, null, 2)}\n`);
  writeFileSync(`${name}.svg`, progressChart(result.perInvocation));
  console.log(lines.join("\n"));
} finally {
  raw.destroy();
  await emulator.stop();
}

/** Index records written and meshes passed, summed over the invocations, against wall time. */
function progressChart(
  perInvocation: ReadonlyArray<Record<string, unknown> & { endedAtSeconds?: number }>,
): string {
  let records = 0;
  let meshesPassed = 0;
  const points = perInvocation.map((data) => {
    records += Number(data.indexRecordsWritten ?? 0);
    meshesPassed += Number(data.meshes ?? 0);
    return { x: data.endedAtSeconds ?? 0, records, meshesPassed };
  });
  return renderChart({
    title: `Backfill of ${TOTAL.toLocaleString("en")} dataplanes, ${TIMEOUT} s timeout`,
    xLabel: "wall seconds at the end of each invocation",
    yLabel: "summed over the invocations so far",
    series: [
      { name: "index records written", points: points.map((p) => ({ x: p.x, y: p.records })) },
      { name: "meshes passed", points: points.map((p) => ({ x: p.x, y: p.meshesPassed })) },
    ],
  });
}
