/**
 * What `vips adopt` costs for a large Kuma installation, against the local engine
 * (VIPS_EMULATOR) with the real DynamoDB adapters: requests and capacity units computed from
 * item sizes as DynamoDB bills them (./cost-meter.ts), by table, per adopted service, and wall
 * time on that engine.
 *
 *   npm run bench:adopt -- 5000
 *
 * The state before: meshes and dataplanes stored (one Kubernetes-size dataplane per service,
 * 20 meshes), the membership index built (as `vips index rebuild` or the backfill's first phase
 * would), no claims and no VIP items. Measured: reading the state, planning, writing every
 * claim, and passing every mesh (what the command does after parsing the files). Then checked:
 * every mesh's item lists exactly the adopted VIPs. Writes bench/results/adopt-cost.{md,json}.
 */

import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { loadConfig } from "../functions/allocator/config.ts";
import { rebuildIndex } from "../functions/allocator/membership-index/rebuild.ts";
import { dynamoPorts } from "../functions/allocator/runtime.ts";
import type { SweepSettings } from "../functions/allocator/sweep/types.ts";
import { planAdoption } from "../functions/domain/adopt-plan.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { parseAdoptFile } from "../tools/cli/adopt-input.ts";
import { applyAdoption, readAdoptState } from "../tools/cli/adoption.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { CostMeter } from "./cost-meter.ts";
import { kubernetesDataplane } from "./kubernetes-dataplane.ts";

const SIZES = (process.argv[2] ?? "5000").split(",").map(Number);
const MESHES = 20;

interface Row {
  services: number;
  meshes: number;
  claimsWritten: number;
  requests: number;
  readUnits: number;
  writeUnits: number;
  byTable: Record<string, { requests: number; readUnits: number; writeUnits: number }>;
  wallSeconds: number;
  verified: boolean;
}

/** Tables with the state before an adoption; then the adoption through `client`, timed. */
async function adoptOnFreshTables(n: number, client: DynamoDBClient) {
  const env = {
    ...prefixedTableEnv(`a${n}-${randomUUID().slice(0, 6)}`, { externalServices: true }),
    DYNAMODB_ENDPOINT: emulator.endpoint,
    VIP_CIDR: "240.0.0.0/4",
  };
  const config = loadConfig(env);
  await createTables(raw, config.tables);
  const meshes = Array.from({ length: MESHES }, (_, m) => `mesh-${m}`);
  await doc.batchWrite(
    config.tables.meshes,
    meshes.map((name) => ({ put: { name } })),
  );
  // Kuma's VIPs: the services numbered from 240.0.0.0, one dataplane each; the file is the
  // plain map `vips export` writes.
  const byMesh = new Map<string, Record<string, string>>(meshes.map((m) => [m, {}]));
  const items = Array.from({ length: n }, (_, i) => {
    const mesh = meshes[i % MESHES] as string;
    const service = `svc-${i}`;
    (byMesh.get(mesh) as Record<string, string>)[service] = config.pool.addressAt(BigInt(i));
    return kubernetesDataplane(mesh, `dp-${i}`, service);
  });
  await doc.batchWrite(
    config.tables.dataplanes,
    items.map((item) => ({ put: item as unknown as Record<string, unknown> })),
  );
  const text = JSON.stringify(Object.fromEntries(byMesh));
  const settings: SweepSettings = {
    pool: config.pool,
    quarantineSeconds: config.quarantineSeconds,
    maxAttempts: config.maxWriteAttempts,
    now: Date.now,
    newId: randomUUID,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
  };
  const plain = { ...dynamoPorts(config, raw), telemetry: new InMemoryTelemetry() };
  await rebuildIndex(plain.source, plain.index);
  const ports = { ...dynamoPorts(config, client), telemetry: new InMemoryTelemetry() };
  const start = performance.now();
  const { entries } = parseAdoptFile(text, "kuma.json");
  const state = await readAdoptState(ports.claims, entries, config.pool);
  const plan = planAdoption(entries, state, { pool: config.pool, renumberOutside: false });
  const result = await applyAdoption(ports, settings, plan);
  const seconds = (performance.now() - start) / 1000;
  return { result, meshes, byMesh, plain, seconds };
}

const emulator = await startEmulator();
const ENGINE_LABEL = ENGINE_LABELS[emulator.engine];
console.error(`engine: ${ENGINE_LABEL}`);
const raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
const doc = new DynamoItemClient(raw);
const rows: Row[] = [];
try {
  for (const n of SIZES) {
    // Twice on fresh tables: metered (units), then unmetered (wall time: the meter's own reads
    // overlap the 16 concurrent writes, so its overhead cannot be subtracted).
    const metered = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
    const meter = new CostMeter(raw);
    meter.install(metered);
    const measured = await adoptOnFreshTables(n, metered);
    metered.destroy();
    const totals = meter.snapshot();
    const timed = await adoptOnFreshTables(n, raw);
    const { result, meshes, byMesh, plain } = timed;
    const wall = timed.seconds;
    if (!measured.result.writes.every((w) => w.written))
      throw new Error("a metered claim was lost");
    let verified = result.writes.every((w) => w.written);
    for (const mesh of meshes) {
      const item = await plain.vipItems.get(mesh);
      const expected = byMesh.get(mesh) as Record<string, string>;
      const listed = item?.vips ?? {};
      if (Object.keys(listed).length !== Object.keys(expected).length) verified = false;
      for (const [service, vip] of Object.entries(expected)) {
        if (listed[service] !== vip) verified = false;
      }
    }
    const byTable: Row["byTable"] = {};
    for (const [table, cost] of totals.byTable) {
      byTable[table.replace(/^a\d+-[0-9a-f]+-/, "")] = { ...cost };
    }
    rows.push({
      services: n,
      meshes: MESHES,
      claimsWritten: result.writes.filter((w) => w.written).length,
      requests: totals.requests,
      readUnits: totals.readUnits,
      writeUnits: totals.writeUnits,
      byTable,
      wallSeconds: wall,
      verified,
    });
    console.error(JSON.stringify(rows.at(-1)));
  }
} finally {
  raw.destroy();
  await emulator.stop();
}

const fmt = (value: number, digits = 1) =>
  value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const header = [
  "| services | meshes | claims written | requests | read units | write units | read / write units per service | wall s locally | ms per service | items list exactly the file's VIPs |",
  "|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
];
const lines = rows.map(
  (r) =>
    `| ${r.services.toLocaleString("en-US")} | ${r.meshes} | ${r.claimsWritten.toLocaleString("en-US")} | ${r.requests.toLocaleString("en-US")} | ${fmt(r.readUnits)} | ${fmt(r.writeUnits)} | ${fmt(r.readUnits / r.services, 2)} / ${fmt(r.writeUnits / r.services, 2)} | ${fmt(r.wallSeconds, 2)} | ${fmt((r.wallSeconds * 1000) / r.services, 2)} | ${r.verified ? "yes" : "NO"} |`,
);
const tableLines = rows.flatMap((r) => [
  "",
  `By table, ${r.services.toLocaleString("en-US")} services (requests / read units / write units; each item of a transaction counts as a request of its table):`,
  "",
  ...Object.entries(r.byTable).map(
    ([table, c]) => `- ${table}: ${c.requests} / ${fmt(c.readUnits)} / ${fmt(c.writeUnits)}`,
  ),
]);
mkdirSync("bench/results", { recursive: true });
writeFileSync(
  "bench/results/adopt-cost.md",
  [
    "# What adopting a Kuma installation costs",
    "",
    `Run ${new Date().toISOString()} with \`npm run bench:adopt -- ${SIZES.join(",")}\` on ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE_LABEL}.`,
    "",
    `Before: ${MESHES} meshes, one Kubernetes-size dataplane per service, the membership index built; no claims, no VIP items. Measured: \`vips adopt\` after parsing (the state read, the plan, every claim written create-if-absent in a two-item transaction, then every mesh passed as \`vips reconcile MESH\` does, its index checked against the dataplanes table). Capacity units are computed from item sizes as DynamoDB bills them (bench/cost-meter.ts; transactions bill twice). Wall time is on the local engine, 16 claim writes at once; it is not AWS latency.`,
    "",
    ...header,
    ...lines,
    ...tableLines,
    "",
  ].join("\n"),
);
writeFileSync("bench/results/adopt-cost.json", `${JSON.stringify(rows, null, 2)}\n`);
console.log([...header, ...lines, ...tableLines].join("\n"));
