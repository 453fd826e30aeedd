/**
 * Done-when of issue 32 (decision 160): a range change of a mesh of a few thousand services,
 * with a function timeout too short for one invocation, goes on in continuations through the
 * local runtime (the function's timeout emulated, its self-invocations queued) and completes
 * with no timeout, no error, and every invariant, on the local engine.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { BatchWriteCommand, GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../functions/allocator/config.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { LocalFunction } from "../../tools/local/local-function.ts";
import { type BatchOutcome, StreamPoller } from "../../tools/local/poller.ts";
import { dataplane } from "../fixtures/builders.ts";
import { InMemoryTelemetry } from "../fixtures/in-memory-ports.ts";
import { invariantViolations } from "../fixtures/invariants.ts";
import { checkVipWrites } from "../fixtures/vip-item-schema.ts";
import { createWorld, startEmulator, type World } from "./harness.ts";

const SERVICES = 3_000;
const PER_DATAPLANE = 10;
/** Seconds: the first pass of the new range alone takes several times this. */
const FUNCTION_TIMEOUT = 3;
/**
 * Seconds: a backfill's step (a page of 100 dataplanes for the index) must fit in one
 * invocation; on a loaded 2-core machine DynamoDB Local takes up to 3 s for one.
 */
const BACKFILL_TIMEOUT = 10;

let emulator: LocalEmulator;
let w: World | undefined;
const dir = mkdtempSync(join(tmpdir(), "vips-continuation-"));

beforeAll(async () => {
  emulator = await startEmulator();
});

afterAll(async () => {
  w?.close();
  await emulator?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a range change of a large mesh with a short function timeout", () => {
  it("goes on in continuations and completes with no error and every invariant", async () => {
    // Arrange: one mesh of 3,000 services (300 dataplanes), allocated in 240.0.0.0/4
    w = await createWorld(emulator);
    const world = w;
    const services = Array.from({ length: SERVICES }, (_, i) => `svc-${i}`);
    await world.putMesh("big");
    const dataplanes = Array.from({ length: SERVICES / PER_DATAPLANE }, (_, d) =>
      dataplane("big", `dp-${d}`, services.slice(d * PER_DATAPLANE, (d + 1) * PER_DATAPLANE)),
    );
    for (let i = 0; i < dataplanes.length; i += 25) {
      await world.doc.send(
        new BatchWriteCommand({
          RequestItems: {
            [world.tables.dataplanes]: dataplanes
              .slice(i, i + 25)
              .map((item) => ({ PutRequest: { Item: item } })),
          },
        }),
      );
    }
    const client = new DynamoDBClient({
      endpoint: emulator.endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
    });
    const schemaErrors: string[] = [];
    checkVipWrites(client, world.tables.vips, schemaErrors);
    const checkpointFile = join(dir, "checkpoints.json");
    const outcomes: BatchOutcome[] = [];
    const run = async (fn: LocalFunction) => {
      const poller = new StreamPoller({
        endpoint: emulator.endpoint,
        region: "us-east-1",
        credentials: { accessKeyId: "test", secretAccessKey: "test" },
        tables: world.tables,
        client,
        handler: fn.streamHandler,
        checkpointFile,
        failureFile: join(dir, "failures.jsonl"),
        onBatch: (info) => void outcomes.push(info.outcome),
      });
      try {
        const report = await poller.drain();
        await fn.idle();
        return report;
      } finally {
        poller.destroy();
      }
    };
    const env = { ...envOf(world), DYNAMODB_ENDPOINT: emulator.endpoint };
    await run(new LocalFunction(loadConfig(env), { client, telemetry: new InMemoryTelemetry() }));
    expect(Object.keys((await world.vipItem("big"))?.vips ?? {})).toHaveLength(SERVICES);

    // Act: VIP_CIDR moves to 10.64.0.0/16; the mesh's item changes (a record on its stream);
    // the function has a 3 s timeout
    const moved = loadConfig({ ...env, VIP_CIDR: "10.64.0.0/16" });
    const telemetry = new InMemoryTelemetry();
    const fn = new LocalFunction(moved, {
      client,
      timeoutSeconds: FUNCTION_TIMEOUT,
      telemetry,
      onNote: () => {},
    });
    outcomes.length = 0;
    await world.doc.send(
      new PutCommand({ TableName: world.tables.meshes, Item: { name: "big", revision: 2 } }),
    );
    const report = await run(fn);

    // Assert: several invocations, none timed out or failed; every VIP in the new range
    try {
      expect(fn.stats.continuations, "continuations").toBeGreaterThanOrEqual(2);
      expect(fn.stats.timeouts, "invocations past the timeout").toBe(0);
      expect(fn.stats.continuationErrors).toBe(0);
      expect(
        outcomes.filter((outcome) => outcome !== "ok"),
        "batch outcomes",
      ).toEqual([]);
      expect(report.failedToDestination).toBe(0);
      expect(telemetry.total("MeshFailures")).toBe(0);
      expect(telemetry.total("PassesContinued")).toBe(fn.stats.continuations);
      expect(schemaErrors, "items that break the schema").toEqual([]);
      const items = await world.allVipItems();
      const violations = invariantViolations({
        items,
        meshes: new Set(await world.meshNames()),
        pool: VipPool.parse("10.64.0.0/16"),
        expected: new Map([["big", services]]),
      });
      expect(violations).toEqual([]);
      const vips = Object.values(items[0]?.vips ?? {});
      expect(new Set(vips).size).toBe(SERVICES);
      expect(vips.every((vip) => vip.startsWith("10.64."))).toBe(true);
    } finally {
      client.destroy();
    }
  }, 600_000);
});

describe("a backfill onto tables that already hold dataplanes, with a short function timeout", () => {
  it("goes on by itself, not at the schedule's next tick, until its cycle is done", async () => {
    // Arrange: 16 meshes of 60 dataplanes (240 services each), written before the function
    // (no stream record is processed): more than one invocation's work even on an idle machine
    const world = await createWorld(emulator);
    const client = new DynamoDBClient({
      endpoint: emulator.endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
    });
    const meshes = Array.from({ length: 16 }, (_, m) => `mesh-${m}`);
    const expected = new Map<string, string[]>();
    const items: Record<string, unknown>[] = [];
    for (const mesh of meshes) {
      await world.putMesh(mesh);
      const names = Array.from({ length: 240 }, (_, i) => `${mesh}-svc-${i}`);
      expected.set(mesh, names);
      for (let d = 0; d < 60; d++) {
        items.push(dataplane(mesh, `dp-${d}`, names.slice(d * 4, d * 4 + 4)));
      }
    }
    for (let i = 0; i < items.length; i += 25) {
      await world.doc.send(
        new BatchWriteCommand({
          RequestItems: {
            [world.tables.dataplanes]: items
              .slice(i, i + 25)
              .map((item) => ({ PutRequest: { Item: item } })),
          },
        }),
      );
    }
    const telemetry = new InMemoryTelemetry();
    const env = { ...envOf(world), DYNAMODB_ENDPOINT: emulator.endpoint };
    const fn = new LocalFunction(loadConfig(env), {
      client,
      timeoutSeconds: BACKFILL_TIMEOUT,
      telemetry,
      onNote: () => {},
    });

    // Act: the deployment's trigger sends the backfill once
    fn.invokeAsync({ vipAllocator: "backfill" });
    await fn.idle();

    // Assert
    try {
      expect(fn.stats.continuations, "continuations").toBeGreaterThanOrEqual(1);
      expect(fn.stats.timeouts, "invocations past the timeout").toBe(0);
      expect(fn.stats.continuationErrors).toBe(0);
      expect(telemetry.total("MeshFailures")).toBe(0);
      // Every invocation that stopped for time handed the cycle over.
      const stopped = telemetry.lines
        .filter((line) => line.message === "sweep invocation finished")
        .map((line) => line.data ?? {});
      expect(stopped.filter((s) => s.stopped === "deadline" && s.continued !== true)).toEqual([]);
      const state = await world.doc.send(
        new GetCommand({ TableName: world.tables.claims, Key: { pk: "sweep" } }),
      );
      expect(state.Item?.phase).toBe("done");
      const violations = invariantViolations({
        items: await world.allVipItems(),
        meshes: new Set(meshes),
        pool: VipPool.parse(world.config.pool.cidr),
        expected,
      });
      expect(violations).toEqual([]);
    } finally {
      client.destroy();
      world.close();
    }
  }, 600_000);
});

/** The world's table names as the environment names them (its config read them from there). */
function envOf(world: World): Record<string, string> {
  const names = world.tables;
  return {
    MESHES_TABLE: names.meshes,
    DATAPLANES_TABLE: names.dataplanes,
    VIPS_TABLE: names.vips,
    CLAIMS_TABLE: names.claims,
    VIP_INDEX_TABLE: names.index,
  };
}
