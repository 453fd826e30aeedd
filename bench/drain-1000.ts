/**
 * Timing run (not a test): 1,000 dataplanes across 10 meshes on a fresh local engine (VIPS_EMULATOR), then the
 * CLI's `drain` as a separate process, as a user runs it. Prints the wall time and checks the
 * result against the contract's invariants (coverage, unique VIPs, same service same VIP).
 *
 *   npx tsx bench/drain-1000.ts [DATAPLANES] [MESHES]
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient, paginateScan } from "@aws-sdk/client-dynamodb";
import { VipPool } from "../functions/domain/pool.ts";
import { toPlain } from "../functions/store/attribute-values.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { resolveTableNames } from "../functions/store/table-definitions.ts";
import { decodeAllocatorItem } from "../functions/store/vip-item-codec.ts";
import { invariantViolations } from "../test/fixtures/invariants.ts";
import { clientConfig } from "../tools/local/aws-clients.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";

const dataplaneCount = Number(process.argv[2] ?? 1000);
const meshCount = Number(process.argv[3] ?? 10);
const servicesPerMesh = 20;

const emulator = await startEmulator();
const ENGINE_LABEL = ENGINE_LABELS[emulator.engine];
console.error(`engine: ${ENGINE_LABEL}`);
const localDir = mkdtempSync(join(tmpdir(), "vips-bench-"));
try {
  const tables = resolveTableNames({});
  const client = new DynamoDBClient(clientConfig({ endpoint: emulator.endpoint }));
  const doc = new DynamoItemClient(client);
  await createTables(client, tables);
  const meshes = Array.from({ length: meshCount }, (_, i) => `mesh-${String(i).padStart(2, "0")}`);
  // Services svc-000.. per mesh; every mesh shares svc-000..svc-004 with the others.
  const serviceOf = (mesh: number, index: number) =>
    index < 5 ? `svc-shared-${index}` : `svc-${mesh}-${index}`;
  const dataplanes = Array.from({ length: dataplaneCount }, (_, i) => {
    const mesh = i % meshCount;
    const service = serviceOf(mesh, Math.floor(i / meshCount) % servicesPerMesh);
    return {
      type: "Dataplane",
      mesh: meshes[mesh],
      name: `dp-${i}`,
      networking: {
        address: `10.${mesh}.${Math.floor(i / 250)}.${(i % 250) + 1}`,
        inbound: [{ port: 8080, servicePort: 80, tags: { "kuma.io/service": service } }],
      },
    };
  });
  const seedStart = performance.now();
  await doc.batchWrite(
    tables.meshes,
    meshes.map((name) => ({ put: { name } })),
  );
  await doc.batchWrite(
    tables.dataplanes,
    dataplanes.map((item) => ({ put: item })),
  );
  const seedSeconds = (performance.now() - seedStart) / 1000;

  const start = performance.now();
  // Not spawnSync: moto's stderr is piped into this process, whose event loop must keep
  // reading it, or moto blocks on a full pipe while holding its request lock.
  const run = await new Promise<{ status: number | null; stdout: string; stderr: string }>(
    (resolveRun) => {
      const child = spawn(
        process.execPath,
        ["--import", "tsx", "tools/cli/bin.ts", "drain", "--endpoint", emulator.endpoint],
        { env: { ...process.env, VIPS_LOCAL_DIR: localDir } },
      );
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.on("close", (status) => resolveRun({ status, stdout, stderr }));
    },
  );
  const seconds = (performance.now() - start) / 1000;
  if (run.status !== 0) throw new Error(`drain exited ${run.status}: ${run.stderr}`);

  const items = [];
  for await (const page of paginateScan({ client }, { TableName: tables.vips })) {
    for (const raw of page.Items ?? []) items.push(decodeAllocatorItem(toPlain(raw)));
  }
  const expected = new Map<string, string[]>();
  for (const item of dataplanes) {
    const services = expected.get(item.mesh as string) ?? [];
    const service = item.networking.inbound[0]?.tags["kuma.io/service"] as string;
    if (!services.includes(service)) services.push(service);
    expected.set(item.mesh as string, services);
  }
  const violations = invariantViolations({
    items,
    meshes: new Set(meshes),
    pool: VipPool.parse("240.0.0.0/4"),
    expected,
  });
  if (violations.length > 0)
    throw new Error(`invariants broken: ${violations.slice(0, 5).join("; ")}`);
  const owner = new Set(items.flatMap((item) => Object.values(item.vips)));
  console.log(
    `seeded ${meshCount} meshes + ${dataplaneCount} dataplanes in ${seedSeconds.toFixed(1)} s; ` +
      `drain (CLI process, incl. ~0.6 s start-up): ${seconds.toFixed(1)} s: ${run.stdout.trim()}; ` +
      `${owner.size} distinct VIPs, invariants hold`,
  );
  client.destroy();
} finally {
  rmSync(localDir, { recursive: true, force: true });
  await emulator.stop();
}
