/**
 * The operator's CLI with kumactl's habits (issue 30), as separate processes against the local
 * engine: apply, get, inspect, delete; what is refused at the door; honest exit codes and
 * messages (reconcile, list, missing tables, endpoints that are not DynamoDB, AWS profiles);
 * export in Kuma's current shape; adopting hosts; watch from the change feed.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { CliRunner, type Run } from "./cli-runner.ts";

let emulator: LocalEmulator;
let localDir: string;
const cli = new CliRunner("op", () => localDir);
const { vips, spawnCli, freshTableEnv } = cli;

beforeAll(async () => {
  emulator = await startTestEngine();
  localDir = mkdtempSync(join(tmpdir(), "vips-cli-op-test-"));
});

afterAll(async () => {
  await emulator?.stop();
  if (localDir !== undefined) rmSync(localDir, { recursive: true, force: true });
});

/** Fresh tables on the engine, and a runner of commands against them. */
async function freshTables(extra: Record<string, string> = {}) {
  const env: Record<string, string> = {
    ...freshTableEnv(),
    DYNAMODB_ENDPOINT: emulator.endpoint,
    ...extra,
  };
  const run = (args: readonly string[], input?: string, more: Record<string, string> = {}) =>
    vips(args, { env: { ...env, ...more }, ...(input !== undefined ? { input } : {}) });
  expect((await run(["tables", "create"])).code).toBe(0);
  return { env, run };
}

const SHOP = "test/fixtures/kuma/apply/shop.yaml";
/** Fresh tables with the shop fixture applied and drained, and the shop mesh's VIP item. */
async function shopAllocated() {
  const { env, run } = await freshTables();
  await run(["apply", "-f", SHOP]);
  await run(["drain"]);
  const item = JSON.parse((await run(["get", "vips", "shop", "-o", "json"])).stdout) as {
    vips: Record<string, string>;
    hosts: Record<string, string>;
    incarnation: string;
    version: number;
  };
  return { env, run, item };
}

const lines = (...text: string[]) => `${text.join("\n")}\n`;

describe("kumactl's habits", { timeout: 180_000 }, () => {
  it("applies universal documents and a kubectl list, gets, deletes (exit 1 when nothing)", async () => {
    const { env, run } = await freshTables();

    const applied = await run(["apply", "-f", SHOP]);
    const again = await run(["apply", "-f", SHOP]);
    const listed = await run(["apply", "-f", "test/fixtures/kuma/apply/kubectl-list.yaml"]);
    const meshes = await run(["get", "meshes", "-o", "yaml"]);
    const dataplanes = await run(["get", "dataplanes", "--mesh", "shop"]);
    const one = await run([
      "get",
      "dataplane",
      "ledger-7d4f9.money",
      "--mesh",
      "payments",
      "-o",
      "json",
    ]);
    const none = await run(["get", "dataplane", "nosuch", "--mesh", "shop"]);
    const deleted = await run(["delete", "mesh", "payments"]);
    const deletedAgain = await run(["delete", "mesh", "payments"]);
    const oldDelete = await run(["mesh", "delete", "payments"]);

    expect(applied).toEqual({
      code: 0,
      stdout: lines(
        "Mesh shop created",
        "Mesh default created",
        "Dataplane shop/shop-1 created",
        "Dataplane default/web-1 created",
        "ExternalService shop/httpbin created",
      ),
      stderr: "",
    });
    expect(again.stdout).toBe(
      lines(
        "Mesh shop unchanged",
        "Mesh default unchanged",
        "Dataplane shop/shop-1 unchanged",
        "Dataplane default/web-1 unchanged",
        "ExternalService shop/httpbin unchanged",
      ),
    );
    expect(listed.stdout).toBe(
      lines("Mesh payments created", "Dataplane payments/ledger-7d4f9.money created"),
    );
    const meshList = parse(meshes.stdout) as { total: number; items: { name: string }[] };
    expect(meshList.total).toBe(3);
    expect(meshList.items.map((m) => m.name)).toEqual(["default", "payments", "shop"]);
    expect(dataplanes).toEqual({
      code: 0,
      stdout: lines(
        "MESH  NAME    ADDRESS       SERVICES       SKIPPED",
        "shop  shop-1  192.168.0.10  cart,checkout  -",
      ),
      stderr: "",
    });
    expect(JSON.parse(one.stdout)).toMatchObject({
      type: "Dataplane",
      mesh: "payments",
      name: "ledger-7d4f9.money",
      networking: { address: "10.2.0.7" },
    });
    expect(none).toEqual({
      code: 1,
      stdout: "",
      stderr: `error: there is no Dataplane "nosuch" in mesh "shop" (table ${env.DATAPLANES_TABLE})\n`,
    });
    expect(deleted.stdout).toBe(
      "Mesh payments deleted (its VIP item goes at the allocator's next pass)\n",
    );
    const nothing = `error: there is no Mesh payments in table ${env.MESHES_TABLE}; nothing deleted\n`;
    expect(deletedAgain).toEqual({ code: 1, stdout: "", stderr: nothing });
    expect(oldDelete).toEqual({ code: 1, stdout: "", stderr: nothing });
  });

  it("inspects a mesh and lists the quarantine; says its version; helps per command", async () => {
    const { run, item } = await shopAllocated();

    const inspected = parse((await run(["inspect", "mesh", "shop", "-o", "yaml"])).stdout);
    await run(["delete", "dataplane", "shop-1", "--mesh", "shop"]);
    await run(["drain"]);
    const quarantine = await run(["get", "quarantine"]);
    const missing = await run(["inspect", "mesh", "nowhere"]);
    const version = await run(["--version"]);
    const help = await run(["delete", "dataplane", "--help"]);

    expect(inspected).toEqual({
      mesh: "shop",
      exists: true,
      dataplanes: 1,
      externalServices: 1,
      item: {
        version: item.version,
        incarnation: item.incarnation,
        updatedAt: expect.any(String),
        cidr: "240.0.0.0/4",
        renumberings: 0,
      },
      lastPassedUnder: "240.0.0.0/4",
      waitingForAddress: false,
      services: item.vips,
      hosts: item.hosts,
      unallocated: {},
      unallocatedHosts: {},
      leaving: [],
    });
    expect(quarantine.code).toBe(0);
    const rows = quarantine.stdout.trimEnd().split("\n");
    expect(rows[0]).toMatch(/^ADDRESS +FORMER OWNER +STATE +RELEASED +FREES$/);
    expect(
      rows
        .slice(1)
        .map((row) => row.split(/ +/).slice(0, 3))
        .sort(),
    ).toEqual([
      [item.vips.cart, "cart", "released"],
      [item.vips.checkout, "checkout", "released"],
    ]);
    expect(quarantine.stderr).toBe(
      "quarantine: 3600 s (VIP_QUARANTINE_SECONDS of this shell; the function's own setting decides)\n",
    );
    expect(missing).toMatchObject({ code: 1 });
    expect(missing.stderr).toMatch(
      /^error: there is no Mesh "nowhere" in table op\d+-meshes and no VIP item of it in table op\d+-vips\n$/,
    );
    expect(version).toEqual({ code: 0, stdout: "serverless-vip-allocator 0.1.0\n", stderr: "" });
    expect(help).toEqual({
      code: 0,
      stdout: lines(
        "usage: vips delete dataplane NAME [--mesh M]",
        "",
        "delete a dataplane; exit 1 if there is none.",
        "",
        "options:",
        "  --mesh M          the mesh (default: every mesh when listing, `default` for one resource)",
        "",
        "examples:",
        "  vips delete dataplane web-1 --mesh shop",
        "",
        "global options: see vips --help",
      ),
      stderr: "",
    });
  });
});

describe("validation where the input enters: refused, nothing written, exit 1", {
  timeout: 180_000,
}, () => {
  const dataplane = (mesh: string, tags: Record<string, string>) =>
    JSON.stringify({
      type: "Dataplane",
      mesh,
      name: "dp-1",
      networking: { address: "10.0.0.1", inbound: [{ port: 8080, tags }] },
    });

  it("refuses what the allocator would skip, naming the document, the field and the rule", async () => {
    const { env, run } = await freshTables();
    await run(["mesh", "put", "shop"]);

    const untagged = await run(["apply", "-f", "test/fixtures/kuma/apply/refused.yaml"]);
    const badName = await run(
      ["apply", "-f", "-"],
      dataplane("shop", { "kuma.io/service": "web app" }),
    );
    const noMesh = await run(
      ["apply", "-f", "-"],
      dataplane("nowhere", { "kuma.io/service": "web" }),
    );
    const oldPut = await run(["dataplane", "put", "-"], dataplane("shop", { app: "web" }));
    const pathAsMesh = await run(["mesh", "put", "./mesh.yaml"]);
    const twoProblems = await run(
      ["apply", "-f", "-"],
      ["type: Mesh", "name: Shop_1", "---", dataplane("elsewhere", { "kuma.io/service": "" })].join(
        "\n",
      ),
    );
    const scan = async (table: string) =>
      (await run(["get", table === "meshes" ? "meshes" : "dataplanes", "-o", "json"])).stdout;

    const missingTag =
      "networking.inbound[0].tags.kuma.io/service: missing: an inbound without a kuma.io/service tag gives no service (the allocator skips it)";
    expect(untagged).toEqual({
      code: 1,
      stdout: "",
      stderr: `error: test/fixtures/kuma/apply/refused.yaml (document 3): Dataplane refused/untagged-1: ${missingTag}; nothing written\n`,
    });
    expect(badName).toEqual({
      code: 1,
      stdout: "",
      stderr:
        'error: stdin: Dataplane shop/dp-1: networking.inbound[0].tags.kuma.io/service: invalid service name "web app": expected 1-253 of [A-Za-z0-9.-_:]; nothing written\n',
    });
    expect(noMesh).toEqual({
      code: 1,
      stdout: "",
      stderr:
        'error: stdin: Dataplane nowhere/dp-1: mesh: mesh "nowhere" does not exist: apply a Mesh named nowhere first, or in the same file (the allocator gives a missing mesh\'s dataplanes no VIP); nothing written\n',
    });
    expect(oldPut).toEqual({
      code: 1,
      stdout: "",
      stderr: `error: stdin: Dataplane shop/dp-1: ${missingTag}; nothing written\n`,
    });
    expect(pathAsMesh).toEqual({
      code: 1,
      stdout: "",
      stderr:
        'error: mesh put: name: invalid mesh name "./mesh.yaml": expected 1-239 of [a-z0-9.-], starting and ending with a letter or digit (a Kubernetes object name, as kuma-<mesh>-dns-vips must be) (to store the Mesh of a file: vips apply -f FILE); nothing written\n',
    });
    expect(twoProblems.code).toBe(1);
    expect(twoProblems.stderr).toBe(
      lines(
        'error: stdin (document 1): Mesh Shop_1: name: invalid mesh name "Shop_1": expected 1-239 of [a-z0-9.-], starting and ending with a letter or digit (a Kubernetes object name, as kuma-<mesh>-dns-vips must be)',
        'error: stdin (document 2): Dataplane elsewhere/dp-1: mesh: mesh "elsewhere" does not exist: apply a Mesh named elsewhere first, or in the same file (the allocator gives a missing mesh\'s dataplanes no VIP)',
        'error: stdin (document 2): Dataplane elsewhere/dp-1: networking.inbound[0].tags.kuma.io/service: invalid service name "": expected 1-253 of [A-Za-z0-9.-_:]; nothing written (3 problems)',
      ),
    );
    // Read back: only the mesh put before is there.
    expect(JSON.parse(await scan("meshes"))).toEqual({
      total: 1,
      items: [{ type: "Mesh", name: "shop" }],
    });
    expect(JSON.parse(await scan("dataplanes"))).toEqual({ total: 0, items: [] });
    expect(env.MESHES_TABLE).toMatch(/^op\d+-meshes$/);
  });
});

describe("honest results", { timeout: 240_000 }, () => {
  it("reconcile exits 1 when names end without a VIP, and its dry run predicts the same ones", async () => {
    const { run } = await freshTables({ VIP_CIDR: "240.0.0.0/31" });
    await run(["apply", "-f", SHOP]);

    const dry = await run(["reconcile", "--all", "--dry-run"]);
    const live = await run(["reconcile", "--all"]);
    const listed = await run(["list"], undefined, { VIP_CIDR: "240.0.0.0/4" });
    const inspected = JSON.parse((await run(["inspect", "mesh", "shop", "-o", "json"])).stdout);

    const without = (r: Run) => r.stdout.split("\n").filter((l) => l.includes(" no VIP: "));
    const reason = "range 240.0.0.0/31 exhausted: all 2 addresses are claimed or quarantined";
    expect(dry.code).toBe(1);
    expect(without(dry)).toEqual([
      `shop: ! checkout would have no VIP: ${reason}`,
      `shop: ! host httpbin.org would have no VIP: ${reason}`,
      `shop: ! httpbin would have no VIP: ${reason}`,
    ]);
    expect(dry.stderr).toBe(
      "error: 3 names of 1 mesh would be left without a VIP (the range is full; see above)\n",
    );
    expect(live.code).toBe(1);
    expect(without(live)).toEqual(without(dry).map((l) => l.replace("would have", "has")));
    expect(live.stderr.trimEnd().split("\n").at(-1)).toBe(
      "error: 3 names of 1 mesh are left without a VIP (the range is full; see above)",
    );
    // What the allocator holds: the names without a VIP, why, and the mesh waiting for one.
    expect(inspected).toMatchObject({
      waitingForAddress: true,
      // Recorded by a stream batch's pass (decision 055), not by the repair sweep's.
      lastPassedUnder: null,
      unallocated: { checkout: reason, httpbin: reason },
      unallocatedHosts: { "httpbin.org": reason },
    });
    // Pool use per the range each item records, whatever this shell's VIP_CIDR says.
    expect(listed.stdout).toBe(
      lines(
        "MESH     SERVICES  VERSION  UNALLOCATED  RANGE         POOL USE",
        "default  1         1        0            240.0.0.0/31  50%",
        "shop     3         1        2            240.0.0.0/31  50%",
        "pool 240.0.0.0/31: 2 distinct VIPs in use of 2 (100%; quarantined addresses not counted)",
      ),
    );
  });

  it("names the table or endpoint at fault; CIDRs in the project's words", async () => {
    const { env, run } = await freshTables();
    await run(["mesh", "put", "shop"]);
    const server: Server = createServer((_request, response) => {
      response.writeHead(404, { "content-type": "text/plain" });
      response.end("Not Found");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const index = await run(["reconcile", "shop"], undefined, { VIP_INDEX_TABLE: "op-no-index" });
      const claims = await run(["get", "quarantine"], undefined, { CLAIMS_TABLE: "op-no-claims" });
      const notDynamo = await run(["get", "vips", "--endpoint", url]);
      const hostBits = await run(["drain"], undefined, { VIP_CIDR: "240.0.0.1/4" });

      expect(index).toMatchObject({
        code: 1,
        stderr: `error: table op-no-index does not exist at ${env.DYNAMODB_ENDPOINT}; create it with: tables create\n`,
      });
      expect(claims).toMatchObject({
        code: 1,
        stderr: `error: table op-no-claims does not exist at ${env.DYNAMODB_ENDPOINT}; create it with: tables create\n`,
      });
      expect(notDynamo).toEqual({
        code: 2,
        stdout: "",
        stderr: `error: ${url} (from --endpoint) is not a DynamoDB endpoint: it answered ListTables with HTTP 404 and no DynamoDB error; check the URL\n`,
      });
      expect(hostBits).toEqual({
        code: 2,
        stdout: "",
        stderr:
          'error: invalid VIP range "240.0.0.1/4": host bits set: 240.0.0.1 is not the first address of a /4 range (did you mean 240.0.0.0/4?)\n',
      });
    } finally {
      server.close();
    }
  });

  it("goes to AWS with --profile and --region through the SDK's chain, and says when there is no region", async () => {
    const dir = mkdtempSync(join(tmpdir(), "vips-aws-"));
    writeFileSync(join(dir, "config"), "[profile ops]\nregion = eu-west-3\n");
    writeFileSync(
      join(dir, "credentials"),
      "[ops]\naws_access_key_id = AKIDOPS\naws_secret_access_key = secret\n",
    );
    // "AWS", with its requests sent to the local engine (the SDK's own endpoint setting).
    const aws = {
      DYNAMODB_ENDPOINT: "",
      // Nothing of the shell running the tests: only the files below.
      AWS_REGION: "",
      AWS_DEFAULT_REGION: "",
      AWS_PROFILE: "",
      AWS_ACCESS_KEY_ID: "",
      AWS_SECRET_ACCESS_KEY: "",
      AWS_SESSION_TOKEN: "",
      AWS_CONFIG_FILE: join(dir, "config"),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, "credentials"),
      AWS_ENDPOINT_URL_DYNAMODB: emulator.endpoint,
      VIPS_TABLE: "op-no-such-vips",
    };
    try {
      const profile = await vips(["get", "vips", "--profile", "ops"], { env: aws });
      const region = await vips(["get", "vips", "--profile", "ops", "--region", "ap-south-1"], {
        env: aws,
      });
      const noRegion = await vips(["get", "vips"], { env: aws });
      const noProfile = await vips(["get", "vips", "--profile", "nosuch"], {
        env: { ...aws, AWS_REGION: "eu-west-1" },
      });

      expect(profile).toEqual({
        code: 1,
        stdout: "",
        stderr:
          "error: table op-no-such-vips does not exist at AWS eu-west-3 (profile ops); create it with: tables create\n",
      });
      expect(region.stderr).toBe(
        "error: table op-no-such-vips does not exist at AWS ap-south-1 (profile ops); create it with: tables create\n",
      );
      expect(noRegion).toEqual({
        code: 2,
        stdout: "",
        stderr:
          "error: no AWS region: pass --region, set AWS_REGION, or give the profile default a region in ~/.aws/config (or pass --endpoint for a local engine)\n",
      });
      expect(noProfile.code).toBe(1);
      expect(noProfile.stderr).toMatch(/^error: no AWS credentials found for profile nosuch \(/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("exports ConfigMaps as current Kuma reads them, with hosts; the origin shape on request", async () => {
    const { run, item } = await shopAllocated();

    const kuma = JSON.parse((await run(["export", "--format", "kuma"])).stdout);
    const origin = JSON.parse((await run(["export", "--format", "kuma-origin"])).stdout);

    const service = (name: string) => ({
      address: item.vips[name],
      outbounds: [{ Port: 0, TagSet: { "kuma.io/service": name }, Origin: "service" }],
    });
    const shop = kuma.items.find(
      (i: { metadata: { name: string } }) => i.metadata.name === "kuma-shop-dns-vips",
    );
    expect(shop).toMatchObject({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "kuma-shop-dns-vips", namespace: "kuma-system" },
    });
    expect(shop.data.config).toBe(
      JSON.stringify({
        "0:cart": service("cart"),
        "0:checkout": service("checkout"),
        "0:httpbin": service("httpbin"),
        "1:httpbin.org": {
          address: item.hosts["httpbin.org"],
          outbounds: [
            {
              Port: 443,
              TagSet: { "kuma.io/service": "httpbin" },
              Origin: "external-service:httpbin",
            },
          ],
        },
      }),
    );
    expect(JSON.parse(origin.items[1].data.config)).toEqual(item.vips);
  });

  it("adopts a Kuma host entry as the host of the mesh's external service", async () => {
    const { run } = await freshTables();
    await run(["mesh", "put", "mesh-2"]);
    const externalService = JSON.stringify({
      type: "ExternalService",
      mesh: "mesh-2",
      name: "host-es",
      networking: { address: "host.com:443" },
      tags: { "kuma.io/service": "backend_2" },
    });
    await run(["apply", "-f", "-"], externalService);

    const adopted = await run(["adopt", "test/fixtures/adopt/typed-keys.json"]);
    await run(["drain"]);
    const item = JSON.parse((await run(["get", "vips", "mesh-2", "-o", "json"])).stdout);

    expect(adopted.code, adopted.stderr).toBe(0);
    expect(adopted.stdout).toContain("  host host.com 240.0.1.4 adopt [");
    expect(item.vips).toEqual({ backend_2: "240.0.1.1" });
    expect(item.hosts).toEqual({ "host.com": "240.0.1.4" });
  });

  it("watch shows each write, hosts included, against the item's own previous version", async () => {
    const { env, run } = await freshTables();
    await run(["apply", "-f", SHOP]);
    await run(["drain"]);
    const watch = spawnCli(["watch"], env);
    let output = "";
    watch.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    watch.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolveExit) => watch.on("close", resolveExit));
    const waitFor = async (pattern: RegExp) => {
      const deadline = Date.now() + 60_000;
      while (!pattern.test(output) && Date.now() < deadline) {
        await new Promise((resolveWait) => setTimeout(resolveWait, 100));
      }
    };
    try {
      await waitFor(/watching the/);
      // Another writer (a drain of its own) makes two versions between this watcher's batches.
      const other = { ...env, VIPS_LOCAL_DIR: mkdtempSync(join(tmpdir(), "vips-other-")) };
      await vips(["delete", "external-service", "httpbin", "--mesh", "shop"], { env: other });
      await vips(["drain"], { env: other });
      await vips(["delete", "dataplane", "shop-1", "--mesh", "shop"], { env: other });
      await vips(["drain"], { env: other });
      await waitFor(/- checkout/);
    } finally {
      watch.kill("SIGINT");
    }
    expect(await exited).toBe(0);
    const changes = output.split("\n").filter((line) => /^(mesh | {2}[-+~!] )/.test(line));
    const v = Number(/^mesh shop: version (\d+)/.exec(changes[0] ?? "")?.[1]);
    expect(changes).toEqual([
      `mesh shop: version ${v} (was ${v - 1})`,
      expect.stringMatching(/^ {2}- httpbin 240\.0\.0\.\d+ \(quarantined\)$/),
      expect.stringMatching(/^ {2}- host httpbin\.org 240\.0\.0\.\d+ \(quarantined\)$/),
      `mesh shop: version ${v + 1} (was ${v})`,
      expect.stringMatching(/^ {2}- cart 240\.0\.0\.\d+ \(quarantined\)$/),
      expect.stringMatching(/^ {2}- checkout 240\.0\.0\.\d+ \(quarantined\)$/),
    ]);
  });
});
