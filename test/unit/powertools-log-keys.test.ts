/**
 * Log lines keep the names they are about (issue 29): Powertools Logger drops a custom field
 * named like one of its own keys (`service` among them: the allocator's name), so the fields the
 * allocator logs never use those keys. The lines are read as Powertools Logger formats them
 * (JSON), not from a recording telemetry.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics } from "@aws-lambda-powertools/metrics";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  POWERTOOLS_RESERVED_KEYS,
  PowertoolsTelemetry,
} from "../../functions/allocator/powertools-telemetry.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { meshWith, World } from "./reconcile-world.ts";

/**
 * The JSON log items Powertools writes while `run` runs. With POWERTOOLS_DEV set, the Logger
 * writes through the global console (one call per item, indented JSON) instead of a Console of
 * its own on stdout, so the calls can be read here.
 */
async function logItems(run: () => Promise<void>): Promise<Record<string, unknown>[]> {
  const written: string[] = [];
  const capture = (chunk: unknown) => {
    written.push(String(chunk));
  };
  for (const method of ["log", "info", "warn", "error", "debug"] as const) {
    vi.spyOn(console, method).mockImplementation(capture);
  }
  try {
    await run();
  } finally {
    vi.restoreAllMocks();
  }
  return written.map((item) => JSON.parse(item) as Record<string, unknown>);
}

function telemetry(): PowertoolsTelemetry {
  vi.stubEnv("POWERTOOLS_DEV", "true");
  return new PowertoolsTelemetry({
    logger: new Logger({ serviceName: "vips-blue", logLevel: "INFO" }),
    metrics: new Metrics({ namespace: "Test", serviceName: "vips-blue" }),
  });
}

afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

describe("the keys Powertools Logger reserves", () => {
  it("are the ones the installed Powertools declares", () => {
    const require = createRequire(import.meta.url);
    const main = require.resolve("@aws-lambda-powertools/logger");
    // lib/cjs/index.js -> lib/esm/constants.js (the constant is not exported).
    const source = readFileSync(join(dirname(main), "../esm/constants.js"), "utf8");
    const declared = source.match(/const ReservedKeys = \[([^\]]*)\]/)?.[1];
    expect(declared, "ReservedKeys in @aws-lambda-powertools/logger").toBeDefined();
    const keys = [...(declared ?? "").matchAll(/'([^']+)'/g)].map((m) => m[1]);
    expect(keys.length).toBeGreaterThan(0);
    expect([...POWERTOOLS_RESERVED_KEYS].sort()).toEqual([...keys].sort());
  });
});

describe("a renumbering's log line", () => {
  it("names the renumbered service (kumaService) next to the allocator's own name (service)", async () => {
    const world = new World({ cidr: "240.0.0.0/27" });
    meshWith(world, "m1", ["web", "constructor"]);
    await world.reconcile("m1");
    world.pool = VipPool.parse("240.0.0.16/28");
    const tele = telemetry();

    const lines = await logItems(async () => {
      await world.reconcile("m1", { telemetry: tele });
    });

    const renumbered = lines.filter(
      (line) => line.message === "service renumbered: its VIP lies outside VIP_CIDR",
    );
    expect(renumbered.map((line) => line.kumaService).sort()).toEqual(["constructor", "web"]);
    for (const line of renumbered) {
      expect(line).toMatchObject({ level: "WARN", service: "vips-blue", mesh: "m1" });
      expect(String(line.to)).toMatch(/^240\.0\.0\.(1[6-9]|2\d|3[01])$/);
    }
    expect(lines.filter((line) => String(line.message).includes("reserved key"))).toEqual([]);
  });

  it("keeps a field under a reserved name as data_<name> instead of dropping it", async () => {
    const tele = telemetry();
    const lines = await logItems(async () => {
      tele.warn("probe", { service: "web", timestamp: 7, mesh: "m" });
      tele.repair("claim-unreleased", { kumaService: "web", message: "m" });
    });
    expect(lines.find((line) => line.message === "probe")).toMatchObject({
      service: "vips-blue",
      data_service: "web",
      data_timestamp: 7,
      mesh: "m",
    });
    expect(lines.find((line) => line.message === "sweep repair")).toMatchObject({
      kind: "claim-unreleased",
      kumaService: "web",
      data_message: "m",
    });
    expect(lines.filter((line) => String(line.message).includes("reserved key"))).toEqual([]);
  });
});
