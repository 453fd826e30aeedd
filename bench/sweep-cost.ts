/**
 * What one repair-sweep cycle costs on a clean state (nothing to correct: the steady state),
 * against the local engine (VIPS_EMULATOR) with the real DynamoDB adapters: requests and capacity units computed
 * from item sizes as DynamoDB bills them (./cost-meter.ts), by table, and wall time on that engine.
 * Detection reads strongly consistent (every read as the event path makes them) and eventually
 * consistent (what the sweep does: anything it finds is read again, strongly, before it is
 * corrected) side by side, in one run.
 *
 *   npm run bench:sweep -- 1000,10000
 *
 * Writes bench/results/sweep-cost.{md,json}.
 */

import { randomUUID } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { loadConfig } from "../functions/allocator/config.ts";
import { rebuildIndex } from "../functions/allocator/membership-index/rebuild.ts";
import { dynamoPorts } from "../functions/allocator/runtime.ts";
import { sweep } from "../functions/allocator/sweep/sweep.ts";
import type { SweepSettings } from "../functions/allocator/sweep/types.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { prefixedTableEnv } from "../functions/store/table-definitions.ts";
import { InMemoryTelemetry } from "../test/fixtures/in-memory-ports.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { CostMeter } from "./cost-meter.ts";
import { kubernetesDataplane } from "./kubernetes-dataplane.ts";

const SIZES = (process.argv[2] ?? "1000,10000").split(",").map(Number);
const MESHES = 20;
const CYCLES_PER_DAY = (24 * 60) / 15;
const DETECTION = ["strong", "eventual"] as const;

interface Row {
  dataplanes: number;
  meshes: number;
  services: number;
  detection: (typeof DETECTION)[number];
  repairs: number;
  requests: number;
  readUnits: number;
  writeUnits: number;
  byTable: Record<string, { requests: number; readUnits: number; writeUnits: number }>;
  wallSeconds: number;
}

const emulator = await startEmulator();
const ENGINE_LABEL = ENGINE_LABELS[emulator.engine];
console.error(`engine: ${ENGINE_LABEL}`);
const raw = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
const doc = new DynamoItemClient(raw);
const rows: Row[] = [];
try {
  for (const [run, n] of SIZES.entries()) {
    const env = {
      ...prefixedTableEnv(`s${run}`),
      VIP_CIDR: "240.0.0.0/4",
    };
    const config = loadConfig(env);
    await createTables(raw, config.tables);
    const meshes = Array.from({ length: MESHES }, (_, m) => `mesh-${m}`);
    await doc.batchWrite(
      config.tables.meshes,
      meshes.map((name) => ({ put: { name } })),
    );
    // Ten dataplanes per service, spread over the meshes.
    const items = Array.from({ length: n }, (_, i) =>
      kubernetesDataplane(meshes[i % MESHES] as string, `dp-${i}`, `svc-${Math.floor(i / 10)}`),
    );
    await doc.batchWrite(
      config.tables.dataplanes,
      items.map((item) => ({ put: item as unknown as Record<string, unknown> })),
    );
    const settings: SweepSettings = {
      pool: config.pool,
      quarantineSeconds: config.quarantineSeconds,
      maxAttempts: config.maxWriteAttempts,
      now: Date.now,
      newId: randomUUID,
      sleep: async () => {},
      random: Math.random,
    };
    const portsOn = (client: DynamoDBClient) => ({
      ...dynamoPorts(config, client),
      telemetry: new InMemoryTelemetry(),
    });
    // The state, not metered: the index and a first cycle that gives every mesh its item.
    const plain = portsOn(raw);
    await rebuildIndex(plain.source, plain.index);
    const first = await sweep(plain, settings);
    console.error(`${n} dataplanes: set-up cycle made ${first.repairs.length} corrections`);

    for (const detection of DETECTION) {
      const metered = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
      const meter = new CostMeter(raw);
      meter.install(metered);
      const start = performance.now();
      const result = await sweep(portsOn(metered), { ...settings, detection });
      const wall = (performance.now() - start - meter.snapshot().overheadMs) / 1000;
      const totals = meter.snapshot();
      metered.destroy();
      const byTable: Row["byTable"] = {};
      for (const [table, cost] of totals.byTable) {
        byTable[table.replace(/^s\d+-/, "")] = { ...cost };
      }
      rows.push({
        dataplanes: n,
        meshes: MESHES,
        services: n / 10,
        detection,
        repairs: result.repairs.length,
        requests: totals.requests,
        readUnits: totals.readUnits,
        writeUnits: totals.writeUnits,
        byTable,
        wallSeconds: wall,
      });
      console.error(JSON.stringify(rows.at(-1)));
    }
  }
} finally {
  raw.destroy();
  await emulator.stop();
}

const fmt = (value: number, digits = 1) =>
  value.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
const tables = ["meshes", "dataplanes", "vips", "claims", "index"];
const header = [
  "| dataplanes | meshes | detection reads | corrections | requests | read units | write units | of which reads by table (" +
    tables.join(" / ") +
    ") | read units per day, every 15 min | wall s locally |",
  `|---:|---:|---|---:|---:|---:|---:|---|---:|---:|`,
];
const lines = rows.map(
  (r) =>
    `| ${r.dataplanes.toLocaleString("en-US")} | ${r.meshes} | ${r.detection} | ${r.repairs} | ${r.requests} | ${fmt(r.readUnits)} | ${fmt(r.writeUnits)} | ${tables.map((t) => fmt(r.byTable[t]?.readUnits ?? 0)).join(" / ")} | ${Math.round(r.readUnits * CYCLES_PER_DAY).toLocaleString("en-US")} | ${fmt(r.wallSeconds, 2)} |`,
);
mkdirSync("bench/results", { recursive: true });
writeFileSync(
  "bench/results/sweep-cost.md",
  [
    "# What one repair-sweep cycle costs",
    "",
    `Run ${new Date().toISOString()} with \`npm run bench:sweep -- ${SIZES.join(",")}\` on ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE_LABEL}.`,
    "",
    `A clean state (every mesh already correct): ${MESHES} meshes, Kubernetes-size dataplanes (about 540 bytes as DynamoDB items), ten per service. Capacity units are computed from item sizes as DynamoDB bills them (bench/cost-meter.ts). "Detection reads" are the reads that look for something to correct; anything found is read again, strongly consistent, before it is corrected.`,
    "",
    ...header,
    ...lines,
    "",
  ].join("\n"),
);
writeFileSync("bench/results/sweep-cost.json", `${JSON.stringify(rows, null, 2)}\n`);
console.log([...header, ...lines].join("\n"));
