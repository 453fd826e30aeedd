/**
 * A pass within the invocation's time (decision 160): claims run sixteen at once, and a pass
 * whose budget has run out makes its first round of claims, writes what it has (the services it
 * did not reach `pending`, or still at their old VIPs outside the range) and defers the mesh to a
 * continuation. Continued passes finish the work with every invariant.
 */
import { describe, expect, it } from "vitest";
import { type ContinueEvent, Handover, MAX_HOPS } from "../../functions/allocator/continuation.ts";
import { PassBudget } from "../../functions/allocator/pass/deps.ts";
import { CLAIM_CONCURRENCY } from "../../functions/allocator/pass/obtain-vip.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { dataplane } from "../fixtures/builders.ts";
import { safetyViolations } from "../fixtures/invariants.ts";
import { createMesh, deliver, indexWorld, put } from "./batch-world.ts";
import { meshWith, World } from "./reconcile-world.ts";

const services = (count: number) =>
  Array.from({ length: count }, (_, i) => `svc-${String(i).padStart(3, "0")}`);

function claimsOf(world: World) {
  return { services: world.claims.serviceClaims(), addresses: world.claims.addressClaims() };
}

/** A budget that has run out already: each pass makes one round of claims. */
function spent(world: World): PassBudget {
  return PassBudget.of(0, () => world.nowMs);
}

describe("a pass whose budget runs out", () => {
  it("claims one round, writes the rest as pending, and defers the mesh", async () => {
    // Arrange
    const world = new World({ cidr: "240.0.0.0/24" });
    meshWith(world, "m", services(40));
    const budget = spent(world);

    // Act
    const outcome = await world.reconcile("m", { budget });

    // Assert
    const item = world.vipItems.peek("m");
    expect(outcome.deferred).toBe(true);
    expect(budget.deferred).toEqual(new Set(["m"]));
    expect(Object.keys(item?.vips ?? {})).toEqual(services(40).slice(0, CLAIM_CONCURRENCY));
    expect(item?.pending).toEqual(services(40).slice(CLAIM_CONCURRENCY));
    expect(await world.passState.getWaiting()).toEqual(["m"]);
    expect(safetyViolations(world.vipItems.all(), claimsOf(world))).toEqual([]);
    // Not done: coverage names the pending services.
    expect(world.violations().some((v) => v.includes("pending"))).toBe(true);
  });

  it("is finished by continued passes, in sorted order without holes, with every invariant", async () => {
    // Arrange
    const world = new World({ cidr: "240.0.0.0/24" });
    meshWith(world, "m", services(40));

    // Act: passes until one is not deferred
    const passes: boolean[] = [];
    for (let i = 0; i < 10; i++) {
      const outcome = await world.reconcile("m", { budget: spent(world) });
      passes.push(outcome.deferred === true);
      if (outcome.deferred !== true) break;
    }

    // Assert
    expect(passes).toEqual([true, true, false]);
    const item = world.vipItems.peek("m");
    expect(item?.pending).toBeUndefined();
    expect(Object.values(item?.vips ?? {})).toEqual(services(40).map((_, i) => `240.0.0.${i}`));
    expect(await world.passState.getWaiting()).toEqual([]);
    expect(world.violations()).toEqual([]);
  });

  it("keeps the old VIPs of the services a range change has not reached yet", async () => {
    // Arrange: 40 services in 240.0.0.0/24, then VIP_CIDR moves to 10.0.0.0/24
    const world = new World({ cidr: "240.0.0.0/24" });
    meshWith(world, "m", services(40));
    await world.reconcile("m");
    world.pool = VipPool.parse("10.0.0.0/24");

    // Act
    const first = await world.reconcile("m", { budget: spent(world) });

    // Assert: the first round renumbered, the others keep their old VIPs; nothing is pending
    const item = world.vipItems.peek("m");
    expect(first.deferred).toBe(true);
    expect(Object.keys(first.renumbered ?? {})).toHaveLength(CLAIM_CONCURRENCY);
    expect(item?.pending).toBeUndefined();
    expect(Object.keys(item?.vips ?? {})).toEqual(services(40));
    const moved = Object.values(item?.vips ?? {}).filter((vip) => vip.startsWith("10."));
    expect(moved).toHaveLength(CLAIM_CONCURRENCY);
    expect(safetyViolations(world.vipItems.all(), claimsOf(world))).toEqual([]);

    // Act: continued
    for (let i = 0; i < 10; i++) {
      if ((await world.reconcile("m", { budget: spent(world) })).deferred !== true) break;
    }

    // Assert
    expect(Object.values(world.vips("m") ?? {}).every((vip) => vip.startsWith("10."))).toBe(true);
    expect(world.violations()).toEqual([]);
  });
});

describe("a batch whose budget runs out", () => {
  it("hands the deferred meshes to a continuation and reports no failure", async () => {
    // Arrange: two meshes of 40 services; a budget already spent
    const world = indexWorld({ cidr: "240.0.0.0/24" });
    const records = [
      createMesh(world, "a"),
      put(world, dataplane("a", "dp", services(40))),
      createMesh(world, "b"),
      put(
        world,
        dataplane(
          "b",
          "dp",
          services(40).map((s) => `b-${s}`),
        ),
      ),
    ];
    const sent: ContinueEvent[] = [];
    const budget = spent(world);
    const handover = new Handover(
      { invokeAsync: async (e) => void sent.push(e) },
      0,
      world.telemetry,
    );

    // Act
    const response = await deliver(world, records, { budget, handover });

    // Assert
    expect(response.batchItemFailures).toEqual([]);
    expect(sent).toEqual([{ vipAllocator: "continue", meshes: ["a", "b"], hop: 1 }]);
    expect(world.telemetry.total("PassesContinued")).toBe(2);
    expect(world.telemetry.total("MeshFailures")).toBe(0);
  });

  it("reports the deferred meshes' records for retry when the continuation cannot be sent", async () => {
    // Arrange
    const world = indexWorld({ cidr: "240.0.0.0/24" });
    const records = [createMesh(world, "a"), put(world, dataplane("a", "dp", services(40)))];
    const handover = new Handover(
      {
        invokeAsync: async () => {
          throw new Error("throttled");
        },
      },
      0,
      world.telemetry,
    );

    // Act
    const response = await deliver(world, records, { budget: spent(world), handover });

    // Assert: the lowest record of mesh a is retried
    expect(response.batchItemFailures).toEqual([
      { itemIdentifier: records[0]?.dynamodb?.SequenceNumber },
    ]);
  });

  it("ends a chain of continuations at its last hop, leaving the rest to the waiting list", async () => {
    // Arrange
    const world = new World();
    const sent: ContinueEvent[] = [];
    const handover = new Handover(
      { invokeAsync: async (e) => void sent.push(e) },
      MAX_HOPS,
      world.telemetry,
    );

    // Act
    const result = await handover.send({ meshes: ["m"] });

    // Assert
    expect(result).toBe("chain-ended");
    expect(sent).toEqual([]);
  });
});
