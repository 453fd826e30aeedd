import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { paginateScan } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VipPool } from "../../functions/domain/pool.ts";
import { toPlain } from "../../functions/store/attribute-values.ts";
import { decodeAddress, decodeService } from "../../functions/store/claim-items.ts";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";
import { main } from "../../tools/cli/main.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
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
  // As `tables create` makes them locally: the optional external-services table too.
  const env = {
    ...prefixedTableEnv(prefix, { externalServices: true }),
    VIP_CIDR: "240.0.0.0/4",
    VIPS_LOCAL_DIR: dir,
  };
  const world = await createWorld(emulator, env);
  return { world, env };
}

/** Runs the CLI in this process; its stdout lines and exit code (errors as exit codes). */
async function vips(env: Record<string, string>, args: string[]) {
  const lines: string[] = [];
  const notes: string[] = [];
  const out = { line: (t: string) => lines.push(t), note: (t: string) => notes.push(t) };
  const { explain } = await import("../../tools/cli/main.ts");
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
        const got = await vips(env, ["get", "vips", shape.mesh, "-o", "json"]);
        expect(JSON.parse(got.stdout).vips).toEqual(shape.vips);
        // What the DNS responder (`vips dns`, queried with dig) answers, from the same table.
        for (const [service, vip] of Object.entries(shape.vips)) {
          const answer = await vips(env, ["resolve", `${service}.mesh`, "--json"]);
          expect(JSON.parse(answer.stdout).answers.map((a: { data: string }) => a.data)).toEqual([
            vip,
          ]);
        }

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
  it("every conflict kind reported per entry; --dry-run exits 1 and writes nothing (tables read back)", async () => {
    const { world, env } = await freshWorld();
    try {
      // The allocator already runs: api and taken have VIPs of its own.
      await provide(world, "live", ["api", "taken"]);
      await world.drain();
      const live = (await world.vipItem("live"))?.vips ?? {};
      const file = join(dir, "conflicts.json");
      writeFileSync(
        file,
        JSON.stringify({
          a: { web: "240.1.0.9", db: "240.1.0.5", api: "240.1.0.1", other: live.taken },
          b: { web: "240.1.0.9", db: "240.1.0.5" },
          c: { web: "240.1.0.2", cache: "240.1.0.5", far: "10.0.0.1" },
        }),
      );
      for (const mesh of ["a", "b", "c"]) await world.putMesh(mesh);
      const before = await Promise.all(
        [world.tables.claims, world.tables.vips].map((t) => scan(world, t)),
      );
      const dry = await vips(env, ["adopt", file, "--dry-run", "--renumber-outside", "--json"]);
      expect(dry.code).toBe(1);
      const plan = JSON.parse(dry.stdout);
      const of = (mesh: string, name: string) =>
        plan.entries.find(
          (e: { mesh: string; name: string }) => e.mesh === mesh && e.name === name,
        );
      expect(of("c", "web")).toMatchObject({
        outcome: "renumber",
        conflict: "different-vips",
        to: "240.1.0.9",
      });
      expect(of("c", "cache")).toMatchObject({
        outcome: "renumber",
        conflict: "shared-vip",
        with: "db",
      });
      expect(of("c", "far")).toMatchObject({ outcome: "renumber", conflict: "outside-range" });
      expect(of("a", "api")).toMatchObject({
        outcome: "renumber",
        conflict: "service-claimed",
        to: live.api,
      });
      expect(of("a", "other")).toMatchObject({
        outcome: "renumber",
        conflict: "address-claimed",
        with: "taken",
      });
      expect(of("a", "web")).toMatchObject({ outcome: "adopt", to: "240.1.0.9" });
      expect(plan.claims).toEqual([
        { service: "db", vip: "240.1.0.5" },
        { service: "web", vip: "240.1.0.9" },
      ]);
      // Without --renumber-outside the VIP outside the range refuses the whole adoption.
      const refused = await vips(env, ["adopt", file]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain("adoption refused: 1 VIPs outside VIP_CIDR 240.0.0.0/4");
      expect(refused.stdout).toContain("far 10.0.0.1 refuse (outside-range)");
      const after = await Promise.all(
        [world.tables.claims, world.tables.vips].map((t) => scan(world, t)),
      );
      expect(after).toEqual(before);

      // A malformed file: named with its key, nothing written.
      const bad = join(dir, "bad.json");
      writeFileSync(bad, '{"a":{"web":"240.1.0.9"},"b":{"db":"not-an-ip"}}');
      const malformed = await vips(env, ["adopt", file, bad]);
      expect(malformed.code).toBe(1);
      expect(malformed.stderr).toBe(
        `${bad}: key "b.db": "not-an-ip" is not an IP address; nothing written`,
      );
      expect(
        await Promise.all([world.tables.claims, world.tables.vips].map((t) => scan(world, t))),
      ).toEqual(before);

      // Adopted for real: the losers renumber as planned, the allocator's claims untouched.
      for (const [mesh, names] of Object.entries({
        a: ["web", "db", "api", "other"],
        b: ["web", "db"],
        c: ["web", "cache", "far"],
      })) {
        await provide(world, mesh, names);
      }
      const done = await vips(env, ["adopt", file, "--renumber-outside"]);
      expect(done.code, done.stderr).toBe(0);
      await world.drain();
      const items = new Map((await world.allVipItems()).map((i) => [i.mesh, i.vips]));
      expect(items.get("a")).toMatchObject({ web: "240.1.0.9", db: "240.1.0.5", api: live.api });
      expect(items.get("a")?.other).not.toBe(live.taken);
      expect(items.get("c")).toMatchObject({ web: "240.1.0.9" });
      expect(items.get("c")?.cache).not.toBe("240.1.0.5");
      expect(items.get("live")).toEqual(live);
      await expectAllInvariants(world, {
        live: ["api", "taken"],
        a: ["api", "db", "other", "web"],
        b: ["db", "web"],
        c: ["cache", "far", "web"],
      });
    } finally {
      world.close();
    }
  });

  it("adoption racing live events: no adopted VIP is ever listed for another service", async () => {
    for (let round = 0; round < 3; round++) {
      const { world, env } = await freshWorld();
      try {
        // Kuma's VIPs start at 240.0.0.0, exactly where a fresh allocator's cursor starts.
        const kuma: Record<string, string> = {};
        for (let i = 0; i < 12; i++) kuma[`svc-${i}`] = `240.0.0.${i}`;
        const file = join(dir, `race-${round}.json`);
        writeFileSync(file, JSON.stringify({ m: kuma }));
        await provide(world, "m", Object.keys(kuma));
        // Other services, new to both, arrive in the same streams.
        await provide(world, "m", ["late-0", "late-1", "late-2", "late-3"]);
        const seen: Array<{ vips: Record<string, string> }> = [];
        const watch = async () => {
          const item = await world.vipItem("m");
          if (item !== undefined) seen.push({ vips: { ...item.vips } });
        };
        const [adopted] = await Promise.all([
          vips(env, ["adopt", file, "--json"]),
          (async () => {
            await new Promise((r) => setTimeout(r, round * 40));
            await world.drain();
          })(),
          (async () => {
            for (let i = 0; i < 10; i++) {
              await watch();
              await new Promise((r) => setTimeout(r, 30));
            }
          })(),
        ]);
        expect(adopted.code, adopted.stderr).toBe(0);
        await world.drain();
        await watch();
        const result = JSON.parse(adopted.stdout);
        const won = new Map<string, string>(
          result.writes
            .filter((w: { written: boolean }) => w.written)
            .map((w: { service: string; vip: string }) => [w.vip, w.service]),
        );
        // Every snapshot: an adopted VIP names only the service it was adopted for.
        for (const snapshot of seen) {
          for (const [service, vip] of Object.entries(snapshot.vips)) {
            const owner = won.get(vip);
            if (owner !== undefined) expect(service).toBe(owner);
          }
        }
        await expectAllInvariants(world, {
          m: [...Object.keys(kuma), "late-0", "late-1", "late-2", "late-3"],
        });
      } finally {
        world.close();
      }
    }
  });

  it("the backfill (a sweep cycle marked as one) respects adopted claims, even ones no mesh listed yet", async () => {
    const { world, env } = await freshWorld();
    try {
      // Dataplanes already stored, their mesh not yet: the adoption lists nothing, so its
      // claims are held in quarantine; the first deployment's backfill then finds the mesh.
      for (const service of ["backend", "frontend", "postgres", "redis", "extra"]) {
        await world.putDataplane(dataplane("mesh-1", `${service}-1`, [service]));
      }
      const adopted = await vips(env, ["adopt", join(FIXTURES, "origin.yaml")]);
      expect(adopted.code, adopted.stderr).toBe(0);
      expect(adopted.stdout).toContain("mesh-1: 0 listed (not in the meshes table");
      expect(adopted.stdout).toContain("held: 4 adopted claims no mesh lists yet are quarantined");
      await world.putMesh("mesh-1");
      const { createRuntime } = await import("../../functions/allocator/runtime.ts");
      const { sweep } = await import("../../functions/allocator/sweep/sweep.ts");
      const { InMemoryTelemetry } = await import("../fixtures/in-memory-ports.ts");
      const runtime = createRuntime(world.config, { client: world.client });
      await sweep({ ...runtime.ports, telemetry: new InMemoryTelemetry() }, runtime.settings, {
        backfill: true,
        stored: true,
      });
      expect((await world.vipItem("mesh-1"))?.vips).toMatchObject({
        backend: "240.0.0.1",
        frontend: "240.0.0.3",
        postgres: "240.0.0.0",
        redis: "240.0.0.2",
      });
      expect(Object.values((await world.vipItem("mesh-1"))?.vips ?? {})).toHaveLength(5);
      await expectAllInvariants(world, {
        "mesh-1": ["backend", "extra", "frontend", "postgres", "redis"],
      });
    } finally {
      world.close();
    }
  });
  it("usage: adopt needs files; --mesh and --format only where they apply", async () => {
    const { world, env } = await freshWorld();
    try {
      expect(await vips(env, ["adopt"])).toMatchObject({ code: 2 });
      expect((await vips(env, ["adopt"])).stderr).toContain("adopt needs FILE names");
      const misplaced = await vips(env, ["get", "vips", "m", "--mesh", "m"]);
      expect(misplaced.code).toBe(2);
      expect(misplaced.stderr).toBe(
        "--mesh applies to get dataplanes, get external-services, delete dataplane, delete external-service, index rebuild, index check, adopt only, not get vips",
      );
      const format = await vips(env, ["export", "--format", "xml"]);
      expect(format).toMatchObject({
        code: 2,
        stderr: '--format must be json, kuma, kuma-origin, got "xml"',
      });
      const plain = await vips(env, ["adopt", join(FIXTURES, "origin.yaml"), "--mesh", "mesh-1"]);
      expect(plain.code, plain.stderr).toBe(0);
      const missing = await vips(env, ["adopt", join(dir, "no-such-file.json")]);
      expect(missing).toMatchObject({ code: 1 });
      expect(missing.stderr).toContain(
        "no-such-file.json: cannot read it (ENOENT); nothing written",
      );
    } finally {
      world.close();
    }
  });
});
