/**
 * The drain of fresh dataplanes, A/B (issue 32): the handler of another tree (default the
 * worktree of commit dde0ceb, `git worktree add /work/wt-dde0ceb dde0ceb` with its own
 * `npm ci`) against this tree's, in one run, alternating, each on a fresh DynamoDB Local
 * seeded alike (10,000 dataplanes in 10 meshes of 20 services, 5 shared by all). The
 * same poller (this tree's) delivers the records; each handler gets an SDK client of its own
 * tree whose requests are counted by operation and table. Timed drains (counting only)
 * alternate A, B, B, A; then one metered drain each (bench/cost-meter.ts: capacity units).
 * Results: bench/results/drain-ab-10000.{md,json,svg}.
 *
 *   npx tsx bench/drain-ab.ts [OLD_TREE] [DATAPLANES] [MESHES]
 */
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { cpus, loadavg, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import type { DynamoDBStreamEvent } from "aws-lambda";
import { VipPool } from "../functions/domain/pool.ts";
import { toPlain } from "../functions/store/attribute-values.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv, resolveTableNames } from "../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../functions/store/vip-item-codec.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { invariantViolations } from "../test/fixtures/invariants.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { StreamPoller } from "../tools/local/poller.ts";
import { CostMeter } from "./cost-meter.ts";
import { renderChart } from "./svg-chart.ts";

const OLD_TREE = resolve(process.argv[2] ?? "/work/wt-dde0ceb");
const NEW_TREE = resolve(import.meta.dirname, "..");
const DATAPLANES = Number(process.argv[3] ?? 10_000);
const MESHES = Number(process.argv[4] ?? 10);
const SERVICES_PER_MESH = 20;

interface Tree {
  readonly label: string;
  readonly root: string;
}
const TREES: Tree[] = [
  { label: `A (${OLD_TREE.split("/").pop()})`, root: OLD_TREE },
  { label: "B (this tree)", root: NEW_TREE },
];

interface Drain {
  readonly tree: string;
  readonly metered: boolean;
  readonly seconds: number;
  readonly requests: number;
  readonly byOperation: Record<string, number>;
  readonly byTableOperation: Record<string, number>;
  readonly readUnits?: number;
  readonly writeUnits?: number;
  readonly load: number;
}

// Each drain on an engine of its own: DynamoDB Local keeps everything in one in-memory
// database, and a later drain on a fuller one would be slower for that alone.
let emulator = await startEmulator();
console.error(`engine: ${ENGINE_LABELS[emulator.engine]}`);
let raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
let doc = new DynamoItemClient(raw);
const drains: Drain[] = [];
let run = 0;
try {
  for (const tree of [TREES[0], TREES[1], TREES[1], TREES[0]] as Tree[]) {
    drains.push(await drain(tree, false));
  }
  for (const tree of TREES) drains.push(await drain(tree, true));
} finally {
  raw.destroy();
  await emulator.stop();
}
report();

async function drain(tree: Tree, metered: boolean): Promise<Drain> {
  if (run > 0) {
    raw.destroy();
    await emulator.stop();
    emulator = await startEmulator();
    raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
    doc = new DynamoItemClient(raw);
  }
  run++;
  const env = { ...prefixedTableEnv(`ab${run}`), DYNAMODB_ENDPOINT: emulator.endpoint };
  const tables = resolveTableNames(env);
  await createTables(raw, tables);
  const { meshes, dataplanes, expected } = workload();
  await doc.batchWrite(
    tables.meshes,
    meshes.map((name) => ({ put: { name } })),
  );
  await doc.batchWrite(
    tables.dataplanes,
    dataplanes.map((item) => ({ put: item })),
  );

  // The tree's own modules and SDK: its handler on a client of its own SDK copy.
  const load = (path: string) => import(pathToFileURL(join(tree.root, path)).href);
  const { loadConfig } = await load("functions/allocator/config.ts");
  // The handler factories moved to handlers.ts (decision 156); older trees have stream-handler.ts.
  const handlers = existsSync(join(tree.root, "functions/allocator/handlers.ts"))
    ? "functions/allocator/handlers.ts"
    : "functions/allocator/handlers.ts";
  const { createStreamHandler } = await load(handlers);
  const sdk = createRequire(join(tree.root, "package.json"))("@aws-sdk/client-dynamodb");
  const client = new sdk.DynamoDBClient(
    clientConfig({ endpoint: emulator.endpoint }),
  ) as DynamoDBClient;
  const byOperation: Record<string, number> = Object.create(null);
  const byTableOperation: Record<string, number> = Object.create(null);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const operation = String(context.commandName).replace(/Command$/, "");
      const table = tableOf(args.input as Record<string, unknown>, tables);
      byOperation[operation] = (byOperation[operation] ?? 0) + 1;
      const key = `${table} ${operation}`;
      byTableOperation[key] = (byTableOperation[key] ?? 0) + 1;
      return await next(args);
    },
    { step: "initialize", name: "countRequests" },
  );
  const meter = metered ? new CostMeter(raw) : undefined;
  meter?.install(client);
  const handler = createStreamHandler(loadConfig(env), {
    client,
    telemetry: new InMemoryTelemetry(),
  }) as (event: DynamoDBStreamEvent) => Promise<never>;
  const poller = new StreamPoller({
    endpoint: emulator.endpoint,
    tables,
    client: raw,
    handler,
  });
  const started = performance.now();
  const report = await poller.drain();
  // A metered drain's time is not comparable (the meter's side reads run beside it).
  const seconds = (performance.now() - started) / 1000;
  poller.destroy();
  client.destroy();
  if (report.failedToDestination > 0) throw new Error(`${tree.label}: records gave up`);
  await checkInvariants(tables.vips, meshes, expected);
  const cost = meter?.snapshot();
  const requests = Object.values(byOperation).reduce((a, b) => a + b, 0);
  const result: Drain = {
    tree: tree.label,
    metered,
    seconds,
    requests,
    byOperation,
    byTableOperation,
    ...(cost !== undefined ? { readUnits: cost.readUnits, writeUnits: cost.writeUnits } : {}),
    load: loadavg()[0] ?? 0,
  };
  console.error(
    `${tree.label}${metered ? " metered" : ""}: ${seconds.toFixed(1)} s, ${requests} requests (load ${result.load.toFixed(2)})`,
  );
  return result;
}

function tableOf(input: Record<string, unknown>, tables: ReturnType<typeof resolveTableNames>) {
  const names = new Map(Object.entries(tables).map(([id, name]) => [name as string, id]));
  const direct = input.TableName;
  if (typeof direct === "string") return names.get(direct) ?? direct;
  const items = (input.RequestItems ?? undefined) as Record<string, unknown> | undefined;
  if (items !== undefined)
    return Object.keys(items)
      .map((t) => names.get(t) ?? t)
      .join("+");
  const transact = input.TransactItems as Array<Record<string, { TableName?: string }>> | undefined;
  if (transact !== undefined) {
    const found = new Set(
      transact.flatMap((entry) =>
        Object.values(entry).map((op) => names.get(op.TableName ?? "") ?? "?"),
      ),
    );
    return [...found].join("+");
  }
  return "?";
}

function workload() {
  const meshes = Array.from({ length: MESHES }, (_, i) => `mesh-${String(i).padStart(2, "0")}`);
  const serviceOf = (mesh: number, index: number) =>
    index < 5 ? `svc-shared-${index}` : `svc-${mesh}-${index}`;
  const expected = new Map<string, string[]>();
  const dataplanes = Array.from({ length: DATAPLANES }, (_, i) => {
    const mesh = i % MESHES;
    const service = serviceOf(mesh, Math.floor(i / MESHES) % SERVICES_PER_MESH);
    const name = meshes[mesh] as string;
    const list = expected.get(name) ?? [];
    if (!list.includes(service)) list.push(service);
    expected.set(name, list);
    return {
      type: "Dataplane",
      mesh: name,
      name: `dp-${i}`,
      networking: {
        address: `10.${mesh}.${Math.floor(i / 250)}.${(i % 250) + 1}`,
        inbound: [{ port: 8080, servicePort: 80, tags: { "kuma.io/service": service } }],
      },
    };
  });
  return { meshes, dataplanes, expected };
}

async function checkInvariants(table: string, meshes: string[], expected: Map<string, string[]>) {
  const items = [];
  for await (const page of paginateScan({ client: raw }, { TableName: table })) {
    for (const item of page.Items ?? []) items.push(decodeAllocatorItem(toPlain(item)));
  }
  const violations = invariantViolations({
    items,
    meshes: new Set(meshes),
    pool: VipPool.parse("240.0.0.0/4"),
    expected,
  });
  if (violations.length > 0) throw new Error(`invariants: ${violations.slice(0, 5).join("; ")}`);
}

function report(): void {
  const operations = [...new Set(drains.flatMap((d) => Object.keys(d.byTableOperation)))].sort();
  const byTree = (label: string, metered: boolean) =>
    drains.filter((d) => d.tree === label && d.metered === metered);
  const mean = (list: Drain[], f: (d: Drain) => number) =>
    list.reduce((sum, d) => sum + f(d), 0) / Math.max(1, list.length);
  const [a, b] = TREES.map((t) => t.label) as [string, string];
  const lines = [
    `# Drain of ${DATAPLANES.toLocaleString("en")} fresh dataplanes in ${MESHES} meshes, A/B`,
    "",
    `Run ${new Date().toISOString()} with \`npx tsx bench/drain-ab.ts ${process.argv.slice(2).join(" ")}\` on ${cpus().length} CPUs (${cpus()[0]?.model ?? "unknown"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE_LABELS[emulator.engine]}. The machine is shared: the load average (1 min) is given per drain.`,
    "",
    `A is the handler of ${OLD_TREE} (commit dde0ceb), B this tree's; the same poller delivers the same records. Timed drains in the order A, B, B, A (counting requests only); then one metered drain each (capacity units from item sizes; its time is not comparable, the meter's side reads run beside it).`,
    "",
    "| drain | tree | s | load | requests | read units | write units |",
    "|---:|---|---:|---:|---:|---:|---:|",
    ...drains.map(
      (d, i) =>
        `| ${i + 1}${d.metered ? " (metered)" : ""} | ${d.tree} | ${d.metered ? "-" : d.seconds.toFixed(1)} | ${d.load.toFixed(2)} | ${d.requests} | ${d.readUnits?.toFixed(0) ?? ""} | ${d.writeUnits?.toFixed(0) ?? ""} |`,
    ),
    "",
    `Mean of the timed drains: A ${mean(byTree(a, false), (d) => d.seconds).toFixed(1)} s, B ${mean(byTree(b, false), (d) => d.seconds).toFixed(1)} s (B/A ${(mean(byTree(b, false), (d) => d.seconds) / mean(byTree(a, false), (d) => d.seconds)).toFixed(2)}).`,
    "",
    "Requests per table and operation (mean of the timed drains of each tree):",
    "",
    "| table, operation | A | B | B - A |",
    "|---|---:|---:|---:|",
    ...operations.map((op) => {
      const av = mean(byTree(a, false), (d) => d.byTableOperation[op] ?? 0);
      const bv = mean(byTree(b, false), (d) => d.byTableOperation[op] ?? 0);
      return `| ${op} | ${av.toFixed(0)} | ${bv.toFixed(0)} | ${(bv - av).toFixed(0)} |`;
    }),
    "",
    `![drains](drain-ab-${DATAPLANES}.svg)`,
    "",
  ];
  mkdirSync("bench/results", { recursive: true });
  const name = `bench/results/drain-ab-${DATAPLANES}`;
  writeFileSync(`${name}.md`, lines.join("\n"));
  writeFileSync(`${name}.json`, `${JSON.stringify(drains, null, 2)}\n`);
  const timed = (label: string) =>
    drains.flatMap((d, i) => (d.tree === label && !d.metered ? [{ x: i + 1, d }] : []));
  writeFileSync(
    `${name}.svg`,
    renderChart({
      title: `Drain of ${DATAPLANES.toLocaleString("en")} fresh dataplanes, A/B`,
      xLabel: "timed drain, in run order",
      yLabel: "per drain",
      series: [a, b].flatMap((label) => [
        { name: `${label}: wall s`, points: timed(label).map(({ x, d }) => ({ x, y: d.seconds })) },
        {
          name: `${label}: requests / 100`,
          points: timed(label).map(({ x, d }) => ({ x, y: d.requests / 100 })),
        },
      ]),
    }),
  );
  console.log(lines.join("\n"));
}
