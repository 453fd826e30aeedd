/**
 * The Python reader (examples/python/vip_reader.py, boto3) run as a subprocess: it decodes every
 * test vector to its expected result (hosts included) and answers every lookup on them as the
 * Node reader does, reads live meshes of both formats from the local engine,
 * and follows the table with the version probe (a refresh that finds nothing moved fetches
 * nothing; a change is fetched once).
 */
import { type ChildProcessWithoutNullStreams, execFile, spawn } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VipItem } from "../../functions/domain/types.ts";
import { type MeshView, meshViewOf, VipSnapshot } from "../../functions/reader/index.ts";
import { fromAttributeMap } from "../../functions/store/attribute-values.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { encodeVipItem } from "../../functions/store/vip-item-codec.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { pythonAnswers, snapshotAnswers } from "../fixtures/reader-answers.ts";
import { type DynamoJson, fromDynamoJson } from "../fixtures/vip-item-schema.ts";
import { createWorld, dataplane, startEmulator, type World } from "./harness.ts";

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL("../../examples/python/vip_reader.py", import.meta.url));
const VECTORS = fileURLToPath(new URL("../../test-vectors", import.meta.url));

let emulator: LocalEmulator;
let world: World;

beforeAll(async () => {
  emulator = await startEmulator();
  world = await createWorld(emulator);
});

afterAll(async () => {
  world?.close();
  await emulator?.stop();
});

async function python(...args: string[]): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout } = await run("python3", [SCRIPT, ...args], { maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: `${failed.stdout ?? ""}${failed.stderr ?? ""}` };
  }
}

const live = () => ["--table", world.tables.vips, "--endpoint", emulator.endpoint];

interface PyView {
  mesh: string;
  version: number;
  format: number;
  vips: Record<string, string>;
  unallocated: Record<string, string>;
}

function big(mesh: string, count: number): VipItem {
  const vips = new Map<string, string>([["__proto__", "240.1.0.1"]]);
  for (let i = 0; i < count; i++)
    vips.set(`svc-${i}_kuma-demo_svc_8080`, `240.2.${i >> 8}.${i & 255}`);
  return {
    mesh,
    version: 9,
    vips: Object.fromEntries(vips),
    cidr: "240.0.0.0/4",
    updatedAt: new Date(0).toISOString(),
    incarnation: "big-1",
  };
}

describe("the Python reader (examples/python, boto3)", () => {
  it("decodes every test vector to its expected result", async () => {
    const out = await python("vectors", VECTORS);
    const count = readdirSync(VECTORS).filter((file) => file.endsWith(".json")).length;
    expect(count).toBe(12);
    expect(out.stdout).toContain(`${count} of ${count} vectors decoded as expected`);
    expect(out.stdout).toContain("ok format1-hosts (2 services, 3 hosts, format 1)");
    expect(out.stdout).toContain("ok format2-hosts (1600 services, 2 hosts, format 2)");
    expect(out.code).toBe(0);
  });

  it("answers every lookup on the vectors as the Node reader does (services, VIPs, hosts)", async () => {
    const views = new Map<string, MeshView>();
    for (const file of readdirSync(VECTORS).filter((name) => name.endsWith(".json"))) {
      const { item } = JSON.parse(readFileSync(join(VECTORS, file), "utf8")) as {
        item: DynamoJson;
      };
      const { view, issues } = meshViewOf(fromAttributeMap(fromDynamoJson(item)));
      expect(issues).toEqual([]);
      if (view !== undefined) views.set(view.mesh, view);
    }
    const node = snapshotAnswers(new VipSnapshot(views));
    const out = await python("answers", "--vectors", VECTORS);
    expect(out.code).toBe(0);
    const py = pythonAnswers(out.stdout);
    expect(py).toEqual(node);
    // What the comparison covers: hosts of both formats, a host in two meshes with two VIPs (the
    // tie goes to the smaller text), a host spelled like a service, and __proto__ as a service.
    const hosts = new Map(node.hosts);
    expect(hosts.get("httpbin.org")).toEqual({
      host: "httpbin.org",
      vip: "240.0.0.22",
      meshes: ["edge"],
    });
    expect(hosts.get("constructor.example.com")).toMatchObject({ meshes: ["large-edge"] });
    expect(hosts.get("web")).toMatchObject({ vip: "240.0.0.24" });
    // `web` is a service of six meshes (three say 240.0.0.0; ties by text) and a host of one.
    expect(new Map(node.services).get("web")).toMatchObject({
      vip: "240.0.0.0",
      addresses: [
        { vip: "240.0.0.0", meshes: ["default", "future", "shrinking"] },
        { vip: "240.0.0.1", meshes: ["growing"] },
        { vip: "240.0.0.20", meshes: ["edge"] },
        { vip: "fd00:ab::", meshes: ["six"] },
      ],
    });
    expect(new Map(node.services).has("__proto__")).toBe(true);
    expect(node.hostVips.map(([vip]) => vip)).toContain("240.0.0.24");
  });

  it("fails a vector whose expected result is wrong (the check can fail)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vips-vectors-"));
    try {
      cpSync(join(VECTORS, "format2-large.json"), join(dir, "format2-large.json"));
      const file = join(dir, "format2-large.json");
      const vector = JSON.parse(readFileSync(file, "utf8")) as { expected: PyView };
      vector.expected.vips = {
        ...vector.expected.vips,
        ...Object.fromEntries([["__proto__", "240.9.9.9"]]),
      };
      writeFileSync(file, JSON.stringify(vector));
      const out = await python("vectors", dir);
      expect(out.stdout).toContain("FAIL format2-large: differs in vips");
      expect(out.code).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads a live mesh the handler wrote (format 1), and a format-2 item", async () => {
    await world.putMesh("default");
    await world.putDataplane(
      dataplane("default", "dp-1", [
        { service: "web", port: 8080 },
        { service: "constructor", port: 8081 },
      ]),
    );
    await world.drain();
    const item = await world.vipItem("default");
    const one = JSON.parse((await python("get", "default", ...live())).stdout) as PyView;
    expect(one).toMatchObject({ mesh: "default", version: item?.version, format: 1 });
    expect(new Map(Object.entries(one.vips))).toEqual(new Map(Object.entries(item?.vips ?? {})));

    const large = big("big", 2000);
    const { stored } = encodeVipItem(large);
    expect(stored.format).toBe(2);
    await new DynamoItemClient(world.client).put({ TableName: world.tables.vips, Item: stored });
    const two = JSON.parse((await python("get", "big", ...live())).stdout) as PyView;
    expect(two.format).toBe(2);
    expect(Object.keys(two.vips)).toHaveLength(2001);
    expect(new Map(Object.entries(two.vips)).get("__proto__")).toBe("240.1.0.1");

    expect((await python("get", "missing", ...live())).code).toBe(1);
  });

  it("follows the table with the version probe, fetching only meshes that moved", async () => {
    const child = spawn("python3", [SCRIPT, "follow", ...live()]);
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const next = async () => {
      const { value } = await lines.next();
      return JSON.parse(String(value)) as {
        stats: {
          fetched: string[];
          changed: string[];
          probe_source: string;
          probe_requests: number;
        };
        views: Record<string, PyView>;
      };
    };
    try {
      const first = await next();
      expect(first.stats.probe_source).toBe("index");
      expect(first.stats.fetched.sort()).toEqual(["big", "default"]);

      await again(child);
      const idle = await next();
      expect(idle.stats.fetched).toEqual([]);
      expect(idle.stats.probe_requests).toBeGreaterThan(0);

      await world.putDataplane(dataplane("default", "dp-2", [{ service: "auth", port: 9090 }]));
      await world.drain();
      await again(child);
      const moved = await next();
      expect(moved.stats.fetched).toEqual(["default"]);
      expect(moved.stats.changed).toEqual(["default"]);
      const item = await world.vipItem("default");
      expect(moved.views.default?.version).toBe(item?.version);
      expect(moved.views.default?.vips.auth).toBe(item?.vips.auth);
    } finally {
      child.stdin.end();
      child.kill();
    }
  });
});

function again(child: ChildProcessWithoutNullStreams): Promise<void> {
  return new Promise((resolve, reject) => {
    child.stdin.write("\n", (error) => (error ? reject(error) : resolve()));
  });
}
