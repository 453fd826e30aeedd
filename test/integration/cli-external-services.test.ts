/**
 * External services through the CLI, as separate processes against the local engine: Kuma's
 * "should build service set for mesh" scenario, a host shared by two external services and
 * served over DNS, bad input refused at the door, and the host's VIP released with its last
 * external service.
 */
import { Resolver } from "node:dns/promises";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { CliRunner } from "./cli-runner.ts";

let emulator: LocalEmulator;
let localDir: string;
const cli = new CliRunner("cli-es", () => localDir);
const { vips, spawnCli, freshTableEnv } = cli;

beforeAll(async () => {
  emulator = await startTestEngine();
  localDir = mkdtempSync(join(tmpdir(), "vips-cli-es-test-"));
});

afterAll(async () => {
  await emulator?.stop();
  if (localDir !== undefined) rmSync(localDir, { recursive: true, force: true });
});

interface PublicItem {
  vips: Record<string, string>;
  hosts?: Record<string, string>;
}

describe("external services through the CLI", { timeout: 180_000 }, () => {
  it("builds Kuma's service sets, serves services and hosts over DNS, and releases a host with its last external service", async () => {
    const env = { ...freshTableEnv(), DYNAMODB_ENDPOINT: emulator.endpoint };
    const ok = async (args: string[], input?: string) => {
      const run = await vips(args, { env, ...(input !== undefined ? { input } : {}) });
      expect(run.code, `${args.join(" ")}: ${run.stderr}`).toBe(0);
      return run;
    };
    const get = async (mesh: string) =>
      JSON.parse((await ok(["get", "vips", mesh, "-o", "json"])).stdout) as PublicItem;

    const tables = await ok(["tables", "create"]);
    expect(tables.stdout).toMatch(/^table \S+-externalServices: created \(stream on\)$/m);
    await ok(["mesh", "put", "mesh-1"]);
    await ok(["mesh", "put", "mesh-2"]);
    await ok(["dataplane", "put", "test/fixtures/kuma/kuma-service-set.yaml"]);
    const put = await ok(["external-service", "put", "test/fixtures/kuma/external-services.yaml"]);
    expect(put.stdout).toBe(
      "ExternalService mesh-1/es-backend created\nExternalService mesh-2/another-mesh-es created\n",
    );
    await ok(["drain"]);

    // Kuma: {backend, frontend, database, metrics, ingress-svc, es-backend} for mesh-1.
    const one = await get("mesh-1");
    expect(Object.keys(one.vips).sort()).toEqual(
      ["backend", "database", "es-backend", "frontend", "ingress-svc", "metrics"].sort(),
    );
    expect(Object.keys(one.hosts ?? {})).toEqual(["es-backend.example.com"]);
    const two = await get("mesh-2");
    expect(Object.keys(two.vips).sort()).toEqual(
      ["another-mesh-es", "another-mesh-ingress-svc", "another-mesh-svc"].sort(),
    );
    expect(Object.keys(two.hosts ?? {})).toEqual(["another.example.org"]);

    // Two on one host with different ports; one more with a bad address: refused, not stored.
    await ok(["external-service", "put", "test/fixtures/kuma/shared-host.yaml"]);
    const bad = await vips(["external-service", "put", "-"], {
      env,
      input: JSON.stringify({
        type: "ExternalService",
        mesh: "mesh-1",
        name: "broken",
        networking: { address: "no-port.example.com" },
        tags: { "kuma.io/service": "broken" },
      }),
    });
    expect(bad).toEqual({
      code: 1,
      stdout: "",
      stderr:
        'error: stdin: ExternalService mesh-1/broken: networking.address: no port in "no-port.example.com": expected "host:port"; nothing written\n',
    });
    await ok(["drain"]);
    const shared = await get("mesh-1");
    expect(shared.vips["httpbin-v1"]).toBeDefined();
    expect(shared.vips["httpbin-v2"]).toBeDefined();
    expect(shared.vips.broken).toBeUndefined();
    const host = shared.hosts?.["httpbin.org"] as string;
    expect(host).toBeDefined();
    expect(Object.values(shared.vips)).not.toContain(host);

    // dig: the external service's name under the domain, the host under its own name.
    const dns = spawnCli(["dns", "--port", "0", "--interval", "1"], env);
    let output = "";
    for (const stream of [dns.stdout, dns.stderr]) {
      stream?.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
    }
    const exited = new Promise<number | null>((resolveExit) => dns.on("close", resolveExit));
    try {
      const deadline = Date.now() + 60_000;
      let port: string | undefined;
      while (port === undefined && Date.now() < deadline) {
        port = /listening on 127\.0\.0\.1:(\d+) \(udp, tcp\)/.exec(output)?.[1];
        if (port === undefined) await new Promise((resolveWait) => setTimeout(resolveWait, 100));
      }
      expect(port).toBeDefined();
      const resolver = new Resolver({ timeout: 3000, tries: 3 });
      resolver.setServers([`127.0.0.1:${port}`]);
      expect(await resolver.resolve4("es-backend.mesh")).toEqual([shared.vips["es-backend"]]);
      expect(await resolver.resolve4("httpbin.org")).toEqual([host]);
      expect(await resolver.reverse(host)).toEqual(["httpbin.org"]);
    } finally {
      dns.kill("SIGINT");
    }
    expect(await exited).toBe(0);

    // The host stays while one external service is on it, and goes with the last.
    await ok(["external-service", "delete", "mesh-1", "httpbin-v1"]);
    await ok(["drain"]);
    expect((await get("mesh-1")).hosts?.["httpbin.org"]).toBe(host);
    await ok(["external-service", "delete", "mesh-1", "httpbin-v2"]);
    const again = await vips(["external-service", "delete", "mesh-1", "httpbin-v2"], { env });
    expect(again).toEqual({
      code: 1,
      stdout: "",
      stderr: `error: there is no ExternalService mesh-1/httpbin-v2 in table ${(env as Record<string, string>).EXTERNAL_SERVICES_TABLE}; nothing deleted\n`,
    });
    await ok(["drain"]);
    const after = await get("mesh-1");
    expect(after.hosts?.["httpbin.org"]).toBeUndefined();
    expect(Object.keys(after.vips)).not.toContain("httpbin-v2");
    // Resolve without the responder: the host's name is gone (quarantined, not reused).
    const gone = await vips(["resolve", "httpbin.org"], { env });
    expect(gone.stdout).toBe("httpbin.org.: REFUSED\n");
  });
});
