import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { paginateScan } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../functions/cli/main.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { LocalEmulator } from "../../functions/local/emulator.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { decodeAddress, decodeService } from "../../functions/store/claim-items.ts";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";
import { invariantViolations, leakViolations } from "../fixtures/invariants.ts";
import { createWorld, dataplane, startEmulator, type World } from "./harness.ts";

let emulator: LocalEmulator;
let dir: string;
const FIXTURES = join(import.meta.dirname, "..", "fixtures", "adopt");

beforeAll(async () => {
  // The CLI runs in this process: the SDK's default credential chain reads process.env.
  process.env.AWS_ACCESS_KEY_ID ??= "test";
  process.env.AWS_SECRET_ACCESS_KEY ??= "test";
  process.env.AWS_REGION ??= "us-east-1";
  emulator = await startEmulator();
  dir = mkdtempSync(join(tmpdir(), "vips-adopt-test-"));
});

afterAll(async () => {
  await emulator?.stop();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

let worlds = 0;
/** Fresh tables and an env for the CLI that names them. */
async function freshWorld(): Promise<{ world: World; env: Record<string, string> }> {
  worlds += 1;
  const prefix = `adopt${process.pid}-${worlds}`;
  const env = { ...prefixedTableEnv(prefix), VIP_CIDR: "240.0.0.0/4", VIPS_LOCAL_DIR: dir };
  const world = await createWorld(emulator, env);
  return { world, env };
}

/** Runs the CLI in this process; its stdout lines and exit code (errors as exit codes). */
async function vips(env: Record<string, string>, args: string[]) {
  const lines: string[] = [];
  const notes: string[] = [];
  const out = { line: (t: string) => lines.push(t), note: (t: string) => notes.push(t) };
  const { explain } = await import("../../functions/cli/main.ts");
  try {
    const code = await main([...args, "--endpoint", emulator.endpoint], { ...env }, out);
    return { code, stdout: lines.join("\n"), stderr: notes.join("\n") };
  } catch (error) {
    const { message, exitCode } = explain(error);
    return { code: exitCode, stdout: lines.join("\n"), stderr: message };
  }
}

async function scan(world: World, table: string) {
  const items: Record<string, unknown>[] = [];
  for await (const page of paginateScan(
    { client: world.client },
    { TableName: table, ConsistentRead: true },
  )) {
    for (const item of page.Items ?? []) items.push(toPlain(item));
  }
  return items.sort((a, b) => String(a.pk ?? a.mesh).localeCompare(String(b.pk ?? b.mesh)));
}

/** Every invariant over the items and the claims, coverage against `expected`. */
async function expectAllInvariants(world: World, expected: Record<string, string[]>) {
  const items = await world.allVipItems();
  const raw = await scan(world, world.tables.claims);
  const services = raw.filter((i) => String(i.pk).startsWith("svc#")).map(decodeService);
  const addresses = raw.filter((i) => String(i.pk).startsWith("addr#")).map(decodeAddress);
  expect([
    ...invariantViolations({
      items,
      meshes: new Set(await world.meshNames()),
      pool: VipPool.parse("240.0.0.0/4"),
      expected: new Map(Object.entries(expected)),
      claims: { services, addresses },
    }),
    ...leakViolations(items, services),
  ]).toEqual([]);
}

/** A mesh with one dataplane per service. */
async function provide(world: World, mesh: string, services: readonly string[]) {
  await world.putMesh(mesh);
  for (const service of services)
    await world.putDataplane(dataplane(mesh, `${service}-1`, [service]));
}

const SHAPES = [
  {
    file: "origin.yaml",
    mesh: "mesh-1",
    flag: [] as string[],
    vips: {
      backend: "240.0.0.1",
      frontend: "240.0.0.3",
      postgres: "240.0.0.0",
      redis: "240.0.0.2",
    },
  },
  {
    file: "typed-keys.json",
    mesh: "mesh-2",
    flag: [],
    vips: { backend_2: "240.0.1.1", frontend_2: "240.0.1.3" },
  },
  {
    file: "default.yaml",
    mesh: "mesh-3",
    flag: [],
    vips: { backend: "240.0.0.1", frontend: "240.0.0.3" },
  },
  {
    file: "tag-first.json",
    mesh: "default",
    flag: ["--mesh", "default"],
    vips: {
      "demo-app_kuma-demo_svc_5000": "240.0.0.4",
      httpbin: "240.0.0.2",
      "redis_kuma-demo_svc_6379": "240.0.0.1",
    },
  },
];

describe("vips adopt on the local engine", { timeout: 120_000 }, () => {
  for (const shape of SHAPES) {
    it(`adopts Kuma's ${shape.file}: vips get shows exactly its VIPs; new services get fresh, non-colliding ones`, async () => {
      const { world, env } = await freshWorld();
      try {
        const services = Object.keys(shape.vips);
        await provide(world, shape.mesh, services);
        const adopted = await vips(env, ["adopt", join(FIXTURES, shape.file), ...shape.flag]);
        expect(adopted.code, adopted.stderr).toBe(0);
        expect(adopted.stdout).toContain(`${shape.mesh}: ${services.length} listed`);
        const got = await vips(env, ["get", shape.mesh]);
        expect(JSON.parse(got.stdout).vips).toEqual(shape.vips);

        // The streams now (their records were written before the adoption): nothing moves.
        await world.drain();
        expect((await world.vipItem(shape.mesh))?.vips).toEqual(shape.vips);
        await provide(world, shape.mesh, ["new-a", "new-b", "new-c"]);
        await world.drain();
        const item = await world.vipItem(shape.mesh);
        const fresh = ["new-a", "new-b", "new-c"].map((s) => item?.vips[s]);
        for (const vip of fresh) {
          expect(vip).toBeDefined();
          expect(Object.values(shape.vips)).not.toContain(vip);
        }
        expect(new Set(Object.values(item?.vips ?? {})).size).toBe(services.length + 3);
        await expectAllInvariants(world, {
          [shape.mesh]: [...services, "new-a", "new-b", "new-c"],
        });

        // Idempotent: a second adoption writes nothing, and its dry run exits 0.
        const again = await vips(env, ["adopt", join(FIXTURES, shape.file), ...shape.flag]);
        expect(again.stdout).toContain("adopt: 0 claims written");
        const check = await vips(env, [
          "adopt",
          join(FIXTURES, shape.file),
          ...shape.flag,
          "--dry-run",
        ]);
        expect(check.code).toBe(0);
      } finally {
        world.close();
      }
    });
  }

  it("round trip: export --format kuma, fresh tables, adopt: identical VIPs (and json the same)", async () => {
    const a = await freshWorld();
    const b = await freshWorld();
    try {
      for (const { world } of [a, b]) {
        await provide(world, "shop", ["web", "api", "__proto__", "constructor"]);
        await provide(world, "ops", ["web", "metrics"]);
      }
      const map = join(dir, "plain.json");
      // Written as text: an object literal's __proto__ key would set a prototype, not a service.
      writeFileSync(
        map,
        '{"shop":{"web":"240.0.3.1","api":"240.0.3.2","__proto__":"240.0.3.3","constructor":"240.0.3.4"},"ops":{"web":"240.0.3.1","metrics":"240.0.9.9"}}',
      );
      expect((await vips(a.env, ["adopt", map])).code).toBe(0);
      await a.world.drain();
      const kuma = await vips(a.env, ["export", "--format", "kuma"]);
      const json = await vips(a.env, ["export"]);
      expect(JSON.parse(json.stdout)).toEqual(JSON.parse(readFileSync(map, "utf8")));
      const exported = join(dir, "exported.json");
      writeFileSync(exported, kuma.stdout);
      expect(
        JSON.parse(kuma.stdout).items.map((i: { metadata: { name: string } }) => i.metadata.name),
      ).toEqual(["kuma-ops-dns-vips", "kuma-shop-dns-vips"]);
      const adopted = await vips(b.env, ["adopt", exported]);
      expect(adopted.code, adopted.stderr).toBe(0);
      await b.world.drain();
      expect((await vips(b.env, ["export"])).stdout).toBe(json.stdout);
      await expectAllInvariants(b.world, {
        shop: ["__proto__", "api", "constructor", "web"],
        ops: ["metrics", "web"],
      });
    } finally {
      a.world.close();
      b.world.close();
    }
  });
});
