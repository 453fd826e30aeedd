import { describe, expect, it } from "vitest";
import { InMemoryClaimStore } from "../fixtures/in-memory-ports.ts";

// A failed condition answers with the item it found (ReturnValuesOnConditionCheckFailure), so
// the claims port does not read the service claim again (decision 054).

describe("a lost condition answers with what it found", () => {
  it("answers a failed join with the service claim its condition found, without a read", async () => {
    // Arrange
    const claims = new InMemoryClaimStore();
    await claims.claimAddress({
      service: "a",
      candidate: { vip: "10.0.0.0", offset: 0n },
      mesh: "m",
      membership: { incarnation: "i1", version: 1 },
      nowMs: 1,
      reclaimCutoffMs: 0,
    });
    const before = claims.requests.length;

    // Act: a join that names another VIP fails its condition
    const joined = await claims.putMembership({
      service: "a",
      vip: "10.0.0.9",
      mesh: "m2",
      membership: { incarnation: "i1", version: 1 },
      resume: false,
    });

    // Assert
    expect(joined.written).toBe(false);
    expect(joined.claim?.vip).toBe("10.0.0.0");
    expect(claims.requests.slice(before)).toEqual(["claims.join"]);
  });

  it("answers a failed leave with the service claim its condition found, without a read", async () => {
    // Arrange: a's membership in m was asserted by incarnation i1 at version 3
    const claims = new InMemoryClaimStore();
    await claims.claimAddress({
      service: "a",
      candidate: { vip: "10.0.0.0", offset: 0n },
      mesh: "m",
      membership: { incarnation: "i1", version: 3 },
      nowMs: 1,
      reclaimCutoffMs: 0,
    });
    const before = claims.requests.length;

    // Act: a leave for versions up to 2 fails its condition
    const left = await claims.removeMembership({
      service: "a",
      mesh: "m",
      incarnation: "i1",
      upToVersion: 2,
    });

    // Assert
    expect(left.written).toBe(false);
    expect(left.claim?.meshes.get("m")).toEqual({ incarnation: "i1", version: 3 });
    expect(claims.requests.slice(before)).toEqual(["claims.leave"]);
  });
});
