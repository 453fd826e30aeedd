/**
 * A range change of one huge mesh under the function's timeout (issue 32, decision 160): one
 * mesh of N services (default 20,000; a Kubernetes-sized dataplane each) is seeded directly
 * (tables and index, bench/seed-tables.ts) and gets its first pass without a time limit; then,
 * for each timeout (default 60 s and 15 s), `VIP_CIDR` moves to a new range and the mesh's
 * record is delivered to the function in the local runtime (tools/local/local-function.ts: the
 * timeout emulated, continuations run as asynchronous invocations). Measured: invocations, wall
 * time, timeouts, failures, requests by operation; every invariant is checked after each run.
 * Results: bench/results/range-change-N.{md,json}.
 *
 *   npx tsx bench/range-change.ts [SERVICES] [TIMEOUTS]     # e.g. 20000 60,15
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { loadConfig } from "../functions/allocator/config.ts";
import { createStreamHandler } from "../functions/allocator/handlers.ts";
import { VipPool } from "../functions/domain/pool.ts";
import { toPlain } from "../functions/store/attribute-values.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../functions/store/vip-item-codec.ts";
import { meshRecord } from "../test/fixtures/builders.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { invariantViolations } from "../test/fixtures/invariants.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { LocalFunction } from "../tools/local/local-function.ts";
import { kubernetesDataplane } from "./kubernetes-dataplane.ts";
import { rangeChangeChart } from "./range-change-chart.ts";
import { RequestCounter } from "./request-counter.ts";
import { seedTables } from "./seed-tables.ts";

const SERVICES = Number(process.argv[2] ?? 20_000);
const TIMEOUTS = (process.argv[3] ?? "60,15").split(",").map(Number);
const MESH = "huge";
const RANGES = ["10.0.0.0/16", "10.1.0.0/16", "10.2.0.0/16", "10.3.0.0/16", "10.4.0.0/16"];

interface Run {
  readonly timeoutSeconds: number | null;
  readonly from: string;
  readonly to: string;
  readonly invocations: number;
  readonly continuations: number;
  readonly timeouts: number;
  readonly failures: number;
  readonly batchItemFailures: number;
  readonly seconds: number;
  readonly requests: number;
  readonly byOperation: Record<string, number>;
  readonly load: readonly number[];
  /** After each pass that wrote: seconds since the run's start, services in the new range. */
  readonly progress: ReadonlyArray<{ readonly seconds: number; readonly moved: number }>;
}

const emulator = await startEmulator();
console.error(`engine: ${ENGINE_LABELS[emulator.engine]}`);
const raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
const doc = new DynamoItemClient(raw);
const runs: Run[] = [];
let seedSeconds = 0;
try {
  const env = { ...prefixedTableEnv("range"), DYNAMODB_ENDPOINT: emulator.endpoint };
  const tables = loadConfig(env).tables;
  await createTables(raw, tables);
  const services = Array.from({ length: SERVICES }, (_, i) => `svc-${String(i).padStart(5, "0")}`);
  const seed = await seedTables(
    doc,
    tables,
    {
      meshes: [MESH],
      dataplanes: services.map((service, i) => kubernetesDataplane(MESH, `dp-${i}`, service)),
    },
    { index: true },
  );
  seedSeconds = seed.seconds;
  console.error(
    `seeded ${seed.dataplanes} dataplanes, ${seed.indexItems} index items in ${seed.seconds.toFixed(1)} s`,
  );

  // The first pass, without a time limit (as the CLI runs it): every service gets a VIP.
  runs.push(await pass(env, null, RANGES[0] as string, RANGES[0] as string, services));
  for (const [i, timeout] of TIMEOUTS.entries()) {
    runs.push(await pass(env, timeout, RANGES[i] as string, RANGES[i + 1] as string, services));
  }
} finally {
  raw.destroy();
  await emulator.stop();
}
report();

async function pass(
  env: Record<string, string>,
  timeoutSeconds: number | null,
  from: string,
  to: string,
  services: readonly string[],
): Promise<Run> {
  const config = loadConfig({ ...env, VIP_CIDR: to });
  const client = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const counter = new RequestCounter();
  counter.install(client);
  const telemetry = new InMemoryTelemetry();
  const started = performance.now();
  const progress: Array<{ seconds: number; moved: number }> = [{ seconds: 0, moved: 0 }];
  let moved = 0;
  const onOutcome = (outcome: { readonly added: Readonly<Record<string, string>> }) => {
    moved += Object.keys(outcome.added).length;
    progress.push({ seconds: (performance.now() - started) / 1000, moved });
  };
  let batchItemFailures = 0;
  let fn: LocalFunction | undefined;
  if (timeoutSeconds === null) {
    const handler = createStreamHandler(config, { client, telemetry, onOutcome });
    const response = await handler({ Records: [meshRecord(config.tables.meshes, MESH)] });
    batchItemFailures = response.batchItemFailures.length;
  } else {
    fn = new LocalFunction(config, {
      client,
      timeoutSeconds,
      telemetry,
      onOutcome,
      onNote: (t) => console.error(t),
    });
    try {
      const response = await fn.streamHandler({
        Records: [meshRecord(config.tables.meshes, MESH)],
      });
      batchItemFailures = response.batchItemFailures.length;
    } catch (error) {
      console.error(`stream invocation failed: ${String(error)}`);
      batchItemFailures = 1;
    }
    await fn.idle();
  }
  const seconds = (performance.now() - started) / 1000;
  client.destroy();
  await checkInvariants(config.tables.vips, to, services);
  const run: Run = {
    timeoutSeconds,
    from,
    to,
    invocations: 1 + (fn?.stats.continuations ?? 0),
    continuations: fn?.stats.continuations ?? 0,
    timeouts: fn?.stats.timeouts ?? 0,
    failures: telemetry.total("MeshFailures") + (fn?.stats.continuationErrors ?? 0),
    batchItemFailures,
    seconds,
    requests: counter.total(),
    byOperation: Object.fromEntries(counter.byOperation),
    load: loadavg(),
    progress,
  };
  console.error(
    `${timeoutSeconds === null ? "first pass" : `timeout ${timeoutSeconds} s`}: ${run.invocations} invocations, ${seconds.toFixed(1)} s, ${run.timeouts} timeouts, ${run.failures} failures; ${counter.describe()} (load ${run.load[0]?.toFixed(2)})`,
  );
  return run;
}

async function checkInvariants(table: string, cidr: string, services: readonly string[]) {
  const items = [];
  for await (const page of paginateScan({ client: raw }, { TableName: table })) {
    for (const item of page.Items ?? []) items.push(decodeAllocatorItem(toPlain(item)));
  }
  const violations = invariantViolations({
    items,
    meshes: new Set([MESH]),
    pool: VipPool.parse(cidr),
    expected: new Map([[MESH, [...services]]]),
  });
  if (violations.length > 0) throw new Error(`invariants: ${violations.slice(0, 5).join("; ")}`);
}

function report(): void {
  const lines = [
    `# A range change of one mesh of ${SERVICES.toLocaleString("en")} services under the function's timeout`,
    "",
    `Run ${new Date().toISOString()} with \`npx tsx bench/range-change.ts ${process.argv.slice(2).join(" ")}\` on ${cpus().length} CPUs (${cpus()[0]?.model ?? "unknown"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE_LABELS[emulator.engine]}; the machine is shared (load average per run below).`,
    "",
    `One mesh of ${SERVICES.toLocaleString("en")} services (a Kubernetes-sized dataplane each), tables and index seeded directly in ${seedSeconds.toFixed(0)} s. The first pass (no time limit) claims every service's VIP; then each run moves \`VIP_CIDR\` to a new range and delivers the mesh's record to the function in the local runtime with the timeout given: the pass renumbers what fits, writes the rest as still at its old VIP, and continues in asynchronous invocations of the function (decision 160). Every invariant is checked after each run (every VIP in the new range).`,
    "",
    "| run | VIP_CIDR | invocations | of which continuations | timeouts | failed meshes | batch item failures | wall s | requests | load (1, 5, 15 min) |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ...runs.map(
      (r) =>
        `| ${r.timeoutSeconds === null ? "first pass, no limit" : `timeout ${r.timeoutSeconds} s`} | ${r.from === r.to ? r.to : `${r.from} -> ${r.to}`} | ${r.invocations} | ${r.continuations} | ${r.timeouts} | ${r.failures} | ${r.batchItemFailures} | ${r.seconds.toFixed(1)} | ${r.requests} | ${r.load.map((l) => l.toFixed(1)).join(", ")} |`,
    ),
    "",
    `![progress](range-change-${SERVICES}.svg)`,
    "",
    "Requests by operation:",
    "",
    ...runs.map(
      (r) =>
        `- ${r.timeoutSeconds === null ? "first pass" : `timeout ${r.timeoutSeconds} s`}: ${Object.entries(
          r.byOperation,
        )
          .sort(([, a], [, b]) => b - a)
          .map(([op, n]) => `${op} ${n}`)
          .join(", ")}`,
    ),
    "",
  ];
  mkdirSync("bench/results", { recursive: true });
  writeFileSync(`bench/results/range-change-${SERVICES}.md`, lines.join("\n"));
  writeFileSync(
    `bench/results/range-change-${SERVICES}.json`,
    `${JSON.stringify(runs, null, 2)}\n`,
  );
  writeFileSync(`bench/results/range-change-${SERVICES}.svg`, rangeChangeChart(SERVICES, runs));
  console.log(lines.join("\n"));
}
