/**
 * The operator's CLI as an operator installs it (decision 140): the packed tarball installed in a
 * scratch project outside the repository, the `vips` bin run with `npx` (compiled JavaScript,
 * no TypeScript loader) against the local engine: apply a multi-document Kuma file, read the
 * VIPs back as YAML, inspect a mesh, see the quarantine after a delete, and a refused apply
 * that writes nothing.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { type Packed, packPackage, REPO_ROOT, type Scratch, scratchProject } from "./pack.ts";

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

let packed: Packed;
let scratch: Scratch;
let emulator: LocalEmulator;
let localDir: string;
const tables = prefixedTableEnv("pkgcli", { externalServices: true });

beforeAll(async () => {
  packed = await packPackage();
  scratch = await scratchProject(packed.tarball);
  emulator = await startTestEngine();
  localDir = mkdtempSync(join(tmpdir(), "vips-pkg-cli-state-"));
  process.stderr.write(
    `[package] CLI: npm pack ${packed.bytes} bytes (${packed.seconds.toFixed(1)} s), scratch install ${scratch.seconds.toFixed(1)} s\n`,
  );
}, 300_000);

afterAll(async () => {
  scratch?.cleanUp();
  packed?.cleanUp();
  await emulator?.stop();
  if (localDir !== undefined) rmSync(localDir, { recursive: true, force: true });
});

/** `npx vips ARGS` in the scratch project, with a user's shell environment and the endpoint. */
function npxVips(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      "npx",
      ["--no-install", "vips", ...args],
      {
        cwd: scratch.dir,
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "",
          VIPS_LOCAL_DIR: localDir,
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
          DYNAMODB_ENDPOINT: emulator.endpoint,
          ...tables,
          ...env,
        },
        maxBuffer: 16 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : Number((error as { code?: unknown }).code ?? 1);
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const fixture = (name: string) =>
  readFileSync(join(REPO_ROOT, "test/fixtures/kuma/apply", name), "utf8");

async function getItem(table: string, key: Record<string, string>) {
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  try {
    const result = await client.send(
      new GetItemCommand({
        TableName: table,
        Key: Object.fromEntries(Object.entries(key).map(([k, v]) => [k, { S: v }])),
        ConsistentRead: true,
      }),
    );
    return result.Item;
  } finally {
    client.destroy();
  }
}

describe("the vips bin, installed from the tarball and run with npx", { timeout: 120_000 }, () => {
  it("ships the bundle with its shebang, and says its version", async () => {
    expect(packed.files).toContain("dist/cli/vips.mjs");
    const bundle = readFileSync(
      join(scratch.dir, "node_modules/serverless-vip-allocator/dist/cli/vips.mjs"),
      "utf8",
    );
    expect(bundle.startsWith("#!/usr/bin/env node\n")).toBe(true);
    const version = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version;
    expect(await npxVips(["--version"])).toEqual({
      code: 0,
      stdout: `serverless-vip-allocator ${version}\n`,
      stderr: "",
    });
  });

  it("applies a multi-document Kuma file, drains, and prints the VIPs as YAML that reads back", async () => {
    expect((await npxVips(["tables", "create"])).code).toBe(0);
    scratch.write("shop.yaml", fixture("shop.yaml"));

    const applied = await npxVips(["apply", "-f", "shop.yaml"]);
    const drained = await npxVips(["drain"]);
    const yaml = await npxVips(["get", "vips", "shop", "-o", "yaml"]);
    const json = await npxVips(["get", "vips", "shop", "-o", "json"]);

    expect(applied).toEqual({
      code: 0,
      stdout: [
        "Mesh shop created",
        "Mesh default created",
        "Dataplane shop/shop-1 created",
        "Dataplane default/web-1 created",
        "ExternalService shop/httpbin created",
        "",
      ].join("\n"),
      stderr: "",
    });
    expect(drained.code).toBe(0);
    expect(yaml.code).toBe(0);
    const item = parse(yaml.stdout) as {
      mesh: string;
      version: number;
      vips: Record<string, string>;
      hosts: Record<string, string>;
      cidr: string;
    };
    expect(item).toEqual(JSON.parse(json.stdout));
    expect(item.mesh).toBe("shop");
    expect(Object.keys(item.vips).sort()).toEqual(["cart", "checkout", "httpbin"]);
    expect(Object.keys(item.hosts)).toEqual(["httpbin.org"]);
    const all = [...Object.values(item.vips), ...Object.values(item.hosts)];
    expect(new Set(all).size).toBe(4);
    for (const vip of all) expect(vip).toMatch(/^240\.0\.0\.\d+$/);
    // What the table holds, read without the CLI.
    const stored = await getItem(tables.VIPS_TABLE as string, { mesh: "shop" });
    expect(stored?.vips?.M?.cart?.S).toBe(item.vips.cart);
    expect(stored?.hosts?.M?.["httpbin.org"]?.S).toBe(item.hosts["httpbin.org"]);
  });

  it("inspects a mesh, and lists the quarantine after a delete", async () => {
    const before = parse((await npxVips(["get", "vips", "shop", "-o", "yaml"])).stdout) as {
      vips: Record<string, string>;
    };
    const inspected = await npxVips(["inspect", "mesh", "shop"]);
    const deleted = await npxVips(["delete", "dataplane", "shop-1", "--mesh", "shop"]);
    const again = await npxVips(["delete", "dataplane", "shop-1", "--mesh", "shop"]);
    await npxVips(["drain"]);
    const quarantine = await npxVips(["get", "quarantine", "-o", "json"]);

    expect(inspected.code).toBe(0);
    expect(inspected.stdout).toMatch(/^Mesh shop\n {2}in table pkgcli-meshes: yes\n/);
    expect(inspected.stdout).toContain("  dataplanes: 1, external services: 1\n");
    expect(inspected.stdout).toContain("  waiting for an address: no\n");
    expect(inspected.stdout).toMatch(new RegExp(`^service +cart +${before.vips.cart}$`, "m"));
    expect(inspected.stdout).toMatch(/^host +httpbin\.org +240\.0\.0\.\d+$/m);
    expect(deleted).toEqual({ code: 0, stdout: "Dataplane shop/shop-1 deleted\n", stderr: "" });
    expect(again).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "error: there is no Dataplane shop/shop-1 in table pkgcli-dataplanes; nothing deleted\n",
    });
    const held = JSON.parse(quarantine.stdout) as {
      quarantineSeconds: number;
      total: number;
      items: {
        vip: string;
        formerOwner: string;
        state: string;
        releasedAt: string;
        frees: string;
      }[];
    };
    expect(held.quarantineSeconds).toBe(3600);
    expect(held.items.map((a) => [a.formerOwner, a.vip, a.state]).sort()).toEqual([
      ["cart", before.vips.cart, "released"],
      ["checkout", before.vips.checkout, "released"],
    ]);
    for (const address of held.items) {
      expect(Date.parse(address.frees) - Date.parse(address.releasedAt)).toBe(3_600_000);
    }
  });

  it("refuses a file the allocator would skip part of: exit 1, nothing written", async () => {
    scratch.write("refused.yaml", fixture("refused.yaml"));

    const refused = await npxVips(["apply", "-f", "refused.yaml"]);

    expect(refused).toEqual({
      code: 1,
      stdout: "",
      stderr:
        "error: refused.yaml (document 3): Dataplane refused/untagged-1: networking.inbound[0].tags.kuma.io/service: missing: an inbound without a kuma.io/service tag gives no service (the allocator skips it); nothing written\n",
    });
    expect(await getItem(tables.MESHES_TABLE as string, { name: "refused" })).toBeUndefined();
    for (const name of ["good-1", "untagged-1"]) {
      expect(
        await getItem(tables.DATAPLANES_TABLE as string, { mesh: "refused", name }),
      ).toBeUndefined();
    }
  });

  it("says how to get the local engine when the demo has none", async () => {
    const demo = await npxVips(["demo", "--once"], {
      VIPS_EMULATOR: "dynamodb-local",
      DYNAMODB_ENDPOINT: "",
    });

    expect(demo.code).toBe(2);
    expect(demo.stderr).toBe(
      "starting DynamoDB Local (local DynamoDB + Streams) ...\n" +
        'error: DynamoDB Local is not installed: in a clone of the repository run npm ci; beside the installed CLI run npm install amplify-dynamodb-simulator@2.9.30 (it needs Java 11+); or set DYNAMODB_LOCAL_DIR to a folder with DynamoDBLocal.jar; or VIPS_EMULATOR=moto with pip install "moto[server]==5.2.1"; or pass --endpoint URL of an engine already running\n',
    );
  });
});
