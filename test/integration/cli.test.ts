import { Resolver } from "node:dns/promises";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { freeLoopbackPort } from "../../tools/local/emulator-process.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { CliRunner, type Run } from "./cli-runner.ts";

let emulator: LocalEmulator;
let localDir: string;
const cli = new CliRunner("cli", () => localDir);
const { vips, spawnCli, freshTableEnv } = cli;

/** A long-running CLI process (watch, dns, demo) whose output is collected as it comes. */
function background(args: readonly string[], env: Record<string, string> = {}) {
  const child = spawnCli(args, env);
  const output = { stdout: "", stderr: "" };
  child.stdout?.on("data", (chunk: Buffer) => {
    output.stdout += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output.stderr += chunk.toString();
  });
  const exited = new Promise<number | null>((resolveExit) => child.on("close", resolveExit));
  /** The first match of `pattern` in the output so far, waiting up to 60 s for it. */
  const waitFor = async (pattern: RegExp): Promise<RegExpExecArray | null> => {
    const deadline = Date.now() + 60_000;
    let match = pattern.exec(output.stdout + output.stderr);
    while (match === null && Date.now() < deadline) {
      await new Promise((resolveWait) => setTimeout(resolveWait, 100));
      match = pattern.exec(output.stdout + output.stderr);
    }
    return match;
  };
  return { child, output, exited, waitFor };
}

beforeAll(async () => {
  emulator = await startTestEngine();
  localDir = mkdtempSync(join(tmpdir(), "vips-cli-test-"));
});

afterAll(async () => {
  await emulator?.stop();
  if (localDir !== undefined) rmSync(localDir, { recursive: true, force: true });
});

// Every step spawns a Node process; on a loaded machine a test can take longer than the default
// 60 s. A generous limit keeps a hang a failure without making a slow machine one.
describe("the vips CLI, run as a separate process against the local engine", {
  timeout: 120_000,
}, () => {
  it("creates tables, stores a mesh and a Kuma dataplane, drains, and prints the VIPs", async () => {
    const env = freshTableEnv();
    const at = ["--endpoint", emulator.endpoint];

    const created = await vips(["tables", "create", ...at], { env });
    const again = await vips(["tables", "create", ...at], { env });
    const mesh = await vips(["mesh", "put", "shop", ...at], { env });
    const dataplane = await vips(["dataplane", "put", "test/fixtures/kuma/shop.yaml", ...at], {
      env,
    });
    // With the function's timeout emulated: a pass this small needs no continuation.
    const drained = await vips(["drain", "--function-timeout", "30", ...at], { env });
    const got = await vips(["get", "vips", "shop", "-o", "json", ...at], { env });
    const drainedAgain = await vips(["drain", ...at], { env });

    expect(created.code).toBe(0);
    expect(created.stdout).toContain(`table ${env.MESHES_TABLE}: created`);
    expect(created.stdout).toContain(`table ${env.VIPS_TABLE}: created`);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`table ${env.MESHES_TABLE}: exists`);
    expect(again.stdout).not.toContain("created");
    expect(mesh).toMatchObject({ code: 0, stdout: "mesh shop created\n" });
    expect(dataplane).toMatchObject({ code: 0, stdout: "Dataplane shop/shop-1 created\n" });
    expect(drained.code).toBe(0);
    expect(drained.stdout).toBe("processed 2 records in 2 batches, 1 mesh\n");
    expect(got.code).toBe(0);
    const item = JSON.parse(got.stdout) as Record<string, unknown>;
    // Fresh state, one writer: services in sorted order from the start of the range.
    expect(item).toMatchObject({
      mesh: "shop",
      version: 1,
      vips: { cart: "240.0.0.0", checkout: "240.0.0.1" },
      cidr: "240.0.0.0/4",
    });
    expect(drainedAgain.stdout).toBe("processed 0 records in 0 batches, 0 meshes\n");
  });

  it("reads the endpoint from DYNAMODB_ENDPOINT, takes JSON on stdin and multi-document YAML, and lists meshes", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    await vips(["tables", "create"], { env });
    await vips(["mesh", "put", "shop"], { env });
    await vips(["mesh", "put", "default"], { env });
    const fromStdin = await vips(["dataplane", "put", "-", "--json"], {
      env,
      input: JSON.stringify({
        type: "Dataplane",
        mesh: "default",
        name: "api-1",
        networking: {
          address: "10.0.0.5",
          inbound: [{ port: 7000, tags: { "kuma.io/service": "api" } }],
        },
      }),
    });
    const multi = await vips(["dataplane", "put", "test/fixtures/kuma/two-replicas.yaml"], { env });
    const ingress = await vips(["dataplane", "put", "test/fixtures/kuma/ingress.yaml"], { env });
    const gateway = await vips(["dataplane", "put", "test/fixtures/kuma/gateway.yaml"], { env });
    const drained = await vips(["drain"], { env });
    const listed = await vips(["list", "--json"], { env });
    const human = await vips(["list"], { env });

    expect(fromStdin).toMatchObject({ code: 0 });
    expect(JSON.parse(fromStdin.stdout)).toEqual({
      type: "Dataplane",
      mesh: "default",
      name: "api-1",
      action: "created",
    });
    expect(multi.stdout).toBe(
      "Dataplane shop/checkout-2 created\nDataplane shop/checkout-3 created\n",
    );
    expect(ingress.code).toBe(0);
    expect(gateway.code).toBe(0);
    expect(drained.code).toBe(0);
    const listing = JSON.parse(listed.stdout) as {
      meshes: { mesh: string; services: number; version: number; unallocated: number }[];
      ranges: { cidr: string; vipsInUse: number }[];
    };
    // default: api + search (advertised by the ingress stored in shop); shop: checkout + payments.
    expect(listing.meshes.map((m) => [m.mesh, m.services, m.unallocated])).toEqual([
      ["default", 2, 0],
      ["shop", 2, 0],
    ]);
    expect(listing.ranges).toEqual([
      { cidr: "240.0.0.0/4", poolSize: "268435456", vipsInUse: 4, poolShare: "1.5e-6%" },
    ]);
    expect(human.stdout).toMatch(/^MESH\s+SERVICES\s+VERSION\s+UNALLOCATED\s+RANGE\s+POOL USE$/m);
    expect(human.stdout).toMatch(/^pool 240\.0\.0\.0\/4: 4 distinct VIPs in use of 268435456/m);
  });

  it("removes a deleted dataplane's services at the next drain", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    await vips(["tables", "create"], { env });
    await vips(["mesh", "put", "default"], { env });
    await vips(["dataplane", "put", "test/fixtures/kuma/web.yaml"], { env });
    await vips(["drain"], { env });
    const before = JSON.parse(
      (await vips(["get", "vips", "default", "-o", "json"], { env })).stdout,
    ) as {
      vips: Record<string, string>;
      version: number;
    };

    const deleted = await vips(["dataplane", "delete", "default", "web-1"], { env });
    const deletedAgain = await vips(["dataplane", "delete", "default", "web-1"], { env });
    await vips(["drain"], { env });
    const after = JSON.parse(
      (await vips(["get", "vips", "default", "-o", "json"], { env })).stdout,
    ) as {
      vips: Record<string, string>;
      version: number;
    };

    expect(before.vips).toEqual({ web: "240.0.0.0" });
    expect(deleted.stdout).toBe("Dataplane default/web-1 deleted\n");
    expect(deletedAgain).toEqual({
      code: 1,
      stdout: "",
      stderr: `error: there is no Dataplane default/web-1 in table ${(env as Record<string, string>).DATAPLANES_TABLE}; nothing deleted\n`,
    });
    expect(after.vips).toEqual({});
    expect(after.version).toBe(before.version + 1);
  });

  it("exits 2 with one line naming the problem on bad usage", async () => {
    const at = ["--endpoint", emulator.endpoint];
    const [unknown, missing, extra, option, once, url, cidr, timeout, timeoutOn] =
      await Promise.all([
        vips(["frobnicate", ...at]),
        vips(["get", ...at]),
        vips(["mesh", "put", "a", "b", ...at]),
        vips(["list", "--verbose", ...at]),
        vips(["drain", "--once", ...at]),
        vips(["list", "--endpoint", "ftp://127.0.0.1:1"]),
        vips(["drain", ...at], { env: { VIP_CIDR: "240.0.0.0/99" } }),
        vips(["drain", "--function-timeout", "0", ...at]),
        vips(["list", "--function-timeout", "5", ...at]),
      ]);

    const oneLine = (run: Run) => run.stderr.trimEnd().split("\n");
    expect(unknown.code).toBe(2);
    expect(oneLine(unknown)).toEqual([
      expect.stringMatching(/^error: unknown command "frobnicate"/),
    ]);
    expect(missing.code).toBe(2);
    expect(oneLine(missing)).toEqual([
      'error: unknown get command "" (expected: get meshes, get dataplanes, get external-services, get vips, get quarantine)',
    ]);
    expect(extra.code).toBe(2);
    expect(oneLine(extra)).toEqual([expect.stringMatching(/mesh put takes NAME, got "a b"/)]);
    expect(option.code).toBe(2);
    expect(oneLine(option)).toEqual([expect.stringMatching(/--verbose/)]);
    expect(once.code).toBe(2);
    expect(oneLine(once)).toEqual([expect.stringMatching(/--once applies to demo only/)]);
    expect(url.code).toBe(2);
    expect(oneLine(url)).toEqual([expect.stringMatching(/ftp:\/\/127\.0\.0\.1:1.*http/)]);
    expect(cidr.code).toBe(2);
    expect(oneLine(cidr)).toEqual([
      'error: invalid VIP range "240.0.0.0/99": prefix length /99 is too long: an IPv4 range has at most /32',
    ]);
    expect(timeout.code).toBe(2);
    expect(oneLine(timeout)).toEqual([
      expect.stringMatching(/--function-timeout "0" is not a number of seconds from 0\.1 to 900/),
    ]);
    expect(timeoutOn.code).toBe(2);
    expect(oneLine(timeoutOn)).toEqual([
      expect.stringMatching(/--function-timeout applies to drain, demo only/),
    ]);
    for (const run of [unknown, missing, extra, option, once, url, cidr, timeout, timeoutOn]) {
      expect(run.stdout).toBe("");
    }
  });

  it("exits 2 naming the URL when the endpoint does not answer", async () => {
    const port = await freeLoopbackPort();
    const url = `http://127.0.0.1:${port}`;

    const [flag, fromEnv] = await Promise.all([
      vips(["get", "vips", "default", "--endpoint", url]),
      vips(["tables", "create"], { env: { DYNAMODB_ENDPOINT: url } }),
    ]);

    expect(flag.code).toBe(2);
    expect(flag.stderr).toBe(
      `error: cannot reach DynamoDB endpoint ${url} (from --endpoint): no answer within 2 s; is DynamoDB Local or moto_server running there?\n`,
    );
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain(`${url} (from DYNAMODB_ENDPOINT)`);
  });

  it("exits 1 naming the field or file when a Dataplane file is wrong, and when a mesh has no VIP item", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    await vips(["tables", "create"], { env });

    const [wrongType, noMesh, noFile, noItem] = await Promise.all([
      vips(["dataplane", "put", "test/fixtures/kuma/not-a-dataplane.yaml"], { env }),
      vips(["dataplane", "put", "test/fixtures/kuma/missing-mesh.yaml"], { env }),
      vips(["dataplane", "put", "test/fixtures/kuma/nothing-here.yaml"], { env }),
      vips(["get", "vips", "nowhere"], { env }),
    ]);

    expect(wrongType).toMatchObject({
      code: 1,
      stderr:
        'error: test/fixtures/kuma/not-a-dataplane.yaml: Mesh shop: type: must be "Dataplane" here (vips apply takes any type); nothing written\n',
    });
    expect(noMesh).toMatchObject({
      code: 1,
      stderr:
        "error: test/fixtures/kuma/missing-mesh.yaml: mesh: required (a non-empty string); nothing written\n",
    });
    expect(noFile).toMatchObject({
      code: 1,
      stderr: "error: cannot read test/fixtures/kuma/nothing-here.yaml: no such file\n",
    });
    expect(noItem.code).toBe(1);
    expect(noItem.stderr).toMatch(/^error: mesh nowhere has no VIP item in table cli\d+-vips/);
  });

  it("exits 1 naming the failure file when records give up", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    await vips(["tables", "create"], { env });
    await vips(["mesh", "put", "doomed"], { env });

    // The handler cannot write VIP items to a table that does not exist: every retry fails.
    const drained = await vips(["drain"], { env: { ...env, VIPS_TABLE: "no-such-vips-table" } });

    expect(drained.code).toBe(1);
    expect(drained.stdout).toMatch(/^processed 1 record in 1 batch \(\d+ invocations\), 1 mesh\n$/);
    const failureFile = join(localDir, "failures.jsonl");
    expect(drained.stderr).toContain(
      `error: 1 record(s) gave up and went to the failure destination ${failureFile}`,
    );
    expect(existsSync(failureFile)).toBe(true);
    const lines = readFileSync(failureFile, "utf8").trim().split("\n");
    const last = JSON.parse(lines.at(-1) ?? "{}") as {
      requestContext: { condition: string };
      records: { keys: unknown }[];
    };
    expect(last.requestContext.condition).toBe("RetryAttemptsExhausted");
    expect(last.records[0]?.keys).toEqual({ name: { S: "doomed" } });
  });

  it("watches the streams, prints each mesh change, and exits 0 on SIGINT", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    await vips(["tables", "create"], { env });
    await vips(["mesh", "put", "default"], { env });
    await vips(["drain"], { env });
    const watch = spawnCli(["watch"], env);
    let stdout = "";
    let stderr = "";
    watch.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    watch.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolveExit) => watch.on("close", resolveExit));
    const waitFor = async (pattern: RegExp): Promise<void> => {
      const deadline = Date.now() + 30_000;
      while (!pattern.test(stdout + stderr) && Date.now() < deadline) {
        await new Promise((resolveWait) => setTimeout(resolveWait, 100));
      }
    };

    try {
      await waitFor(/watching the/);
      await vips(["dataplane", "put", "test/fixtures/kuma/web.yaml"], { env });
      await waitFor(/\+ web 240\.0\.0\.\d+/);
      await vips(["dataplane", "delete", "default", "web-1"], { env });
      await waitFor(/- web 240\.0\.0\.\d+ \(quarantined\)/);
    } finally {
      watch.kill("SIGINT");
    }
    const code = await exited;

    expect(stdout).toMatch(/^mesh default: version 2 \(was 1\)\n {2}\+ web 240\.0\.0\.0$/m);
    expect(stdout).toMatch(
      /^mesh default: version 3 \(was 2\)\n {2}- web 240\.0\.0\.0 \(quarantined\)$/m,
    );
    expect(stderr).toContain("stopping");
    expect(code).toBe(0);
  });

  it("runs the demo on its own local engine and prints a per-mesh summary with --once", async () => {
    const demo = await vips(["demo", "--once"]);

    expect(demo.code).toBe(0);
    expect(demo.stderr).toMatch(
      /seeded 3 meshes \(default, payments, edge\) and 50 dataplanes and 1 external service:/,
    );
    expect(demo.stderr).toMatch(/draining streams: 54\/54 records/);
    expect(demo.stderr).toMatch(/processed 54 records/);
    // default: five services of dataplanes, search (an ingress's) and httpbin (external).
    expect(demo.stdout).toMatch(/^mesh default: version \d+, 7 services \(240\.0\.0\.0\/4\)$/m);
    expect(demo.stdout).toMatch(/^ {2}httpbin +240\.0\.0\.\d+$/m);
    expect(demo.stdout).toMatch(/^ {2}host httpbin\.org {2}240\.0\.0\.\d+$/m);
    expect(demo.stdout).toMatch(/^mesh payments: version \d+, 4 services/m);
    expect(demo.stdout).toMatch(/^mesh edge: version \d+, 2 services/m);
    expect(demo.stdout).toMatch(/^ {2}search +240\.0\.0\.\d+$/m);
    expect(demo.stdout).toMatch(/^ {2}risk-score +240\.0\.0\.\d+$/m);
    expect(demo.stdout).toMatch(/^shared: auth has 240\.0\.0\.\d+ in meshes default, payments$/m);
    expect(demo.stdout).not.toMatch(/edge-gateway|legacy|batch-job/);
    // The emulator the demo started is gone with it.
    const endpoint = /DynamoDB endpoint: (http:\/\/\S+)/.exec(demo.stderr)?.[1];
    expect(endpoint).toBeDefined();
    await expect(fetch(endpoint as string)).rejects.toThrow();
  });

  it("resolves names and VIPs as the DNS responder would, and serves them over DNS", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    await vips(["tables", "create"], { env });
    await vips(["mesh", "put", "default"], { env });
    await vips(["dataplane", "put", "test/fixtures/kuma/web.yaml"], { env });
    await vips(["drain"], { env });

    const [name, upper, reverse, json, missing, outside, misplaced] = await Promise.all([
      vips(["resolve", "web.mesh"], { env }),
      vips(["resolve", "WEB.MESH.", "--ttl", "5"], { env }),
      vips(["resolve", "240.0.0.0"], { env }),
      vips(["resolve", "web.svc.local", "--domain", "svc.local", "--json"], { env }),
      vips(["resolve", "nothing.mesh"], { env }),
      vips(["resolve", "example.com"], { env }),
      vips(["resolve", "web.mesh", "--port", "53"], { env }),
    ]);

    expect(name).toMatchObject({ code: 0, stdout: "web.mesh.\t30\tIN\tA\t240.0.0.0\n" });
    expect(upper).toMatchObject({ code: 0, stdout: "web.mesh.\t5\tIN\tA\t240.0.0.0\n" });
    expect(reverse).toMatchObject({
      code: 0,
      stdout: "0.0.0.240.in-addr.arpa.\t30\tIN\tPTR\tweb.mesh.\n",
    });
    expect(JSON.parse(json.stdout)).toEqual({
      name: "web.svc.local",
      status: "NOERROR",
      answers: [{ name: "web.svc.local", type: "A", data: "240.0.0.0", ttl: 30 }],
    });
    expect(missing).toMatchObject({ code: 1, stdout: "nothing.mesh.: NXDOMAIN\n" });
    expect(outside).toMatchObject({ code: 1, stdout: "example.com.: REFUSED\n" });
    expect(misplaced.code).toBe(2);
    expect(misplaced.stderr).toBe("error: --port applies to dns only, not resolve\n");

    // A TTL that outlives the quarantine is refused unless forced.
    const tooLong = await vips(["dns", "--ttl", "3600", "--port", "0"], { env });
    expect(tooLong.code).toBe(2);
    expect(tooLong.stderr).toMatch(
      /^error: --ttl 3600 .*exceeds the quarantine \(VIP_QUARANTINE_SECONDS=3600\).*--force\n$/,
    );

    const dns = background(["dns", "--port", "0", "--interval", "1"], env);
    try {
      const listening = await dns.waitFor(/listening on 127\.0\.0\.1:(\d+) \(udp, tcp\)/);
      expect(listening).not.toBeNull();
      const resolver = new Resolver({ timeout: 3000, tries: 3 });
      resolver.setServers([`127.0.0.1:${listening?.[1]}`]);
      expect(await resolver.resolve4("web.mesh")).toEqual(["240.0.0.0"]);
      await expect(resolver.resolve4("api.mesh")).rejects.toMatchObject({ code: "ENOTFOUND" });
      // A new service reaches the responder at its next refresh, with one log line.
      await vips(["dataplane", "put", "-"], {
        env,
        input: JSON.stringify({
          type: "Dataplane",
          mesh: "default",
          name: "api-1",
          networking: {
            address: "10.0.0.5",
            inbound: [{ port: 7000, tags: { "kuma.io/service": "api" } }],
          },
        }),
      });
      await vips(["drain"], { env });
      await dns.waitFor(/dns: refresh: \+1 -0 ~0 VIPs in 1 mesh/);
      expect(await resolver.resolve4("api.mesh")).toEqual(["240.0.0.1"]);
    } finally {
      dns.child.kill("SIGINT");
    }
    expect(await dns.exited).toBe(0);
    expect(dns.output.stderr.match(/dns: refresh:/g)).toHaveLength(1);
  });

  it("runs the demo with a DNS responder and prints how to query it", async () => {
    const demo = background(["demo"]);
    try {
      const hint = await demo.waitFor(/dig @127\.0\.0\.1 -p (\d+) auth\.mesh/);
      expect(hint).not.toBeNull();
      const resolver = new Resolver({ timeout: 3000, tries: 3 });
      resolver.setServers([`127.0.0.1:${hint?.[1]}`]);
      const [auth] = await resolver.resolve4("auth.mesh");
      expect(demo.output.stdout).toContain(`shared: auth has ${auth} in meshes default, payments`);
      expect(await resolver.reverse(auth as string)).toEqual(["auth.mesh"]);
    } finally {
      demo.child.kill("SIGINT");
    }
    expect(await demo.exited).toBe(0);
  });
});
