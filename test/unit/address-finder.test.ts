import { describe, expect, it } from "vitest";
import { AddressFinder } from "../../functions/allocator/pass/address-finder.ts";
import { VipPool } from "../../functions/domain/pool.ts";
import { InMemoryClaimStore } from "../fixtures/in-memory-ports.ts";

const membership = { incarnation: "inc", version: 1 };

describe("AddressFinder", () => {
  it("gives concurrent callers candidates of a small range while the first window is read", async () => {
    // Arrange: a fresh /27 (32 free addresses), four passes asking at once
    const claims = new InMemoryClaimStore();
    const finder = new AddressFinder(claims, VipPool.parse("240.0.0.0/27"), () => 0, 3600);

    // Act
    const candidates = await Promise.all([
      finder.next(),
      finder.next(),
      finder.next(),
      finder.next(),
    ]);

    // Assert
    expect(candidates.map((candidate) => candidate?.vip)).toEqual([
      "240.0.0.0",
      "240.0.0.1",
      "240.0.0.2",
      "240.0.0.3",
    ]);
  });

  it("hands a returned candidate out again first, so a fresh range has no holes", async () => {
    // Arrange
    const claims = new InMemoryClaimStore();
    const finder = new AddressFinder(claims, VipPool.parse("240.0.0.0/28"), () => 0, 3600);
    const first = await finder.next();
    const second = await finder.next();

    // Act: the first pass finds its service already claimed and does not use its candidate
    if (first === undefined || second === undefined) throw new Error("no candidate");
    finder.returned(first);
    finder.taken(second);
    const third = await finder.next();

    // Assert
    expect(third?.vip).toBe("240.0.0.0");
  });

  it("says the range is full only after candidates held by other passes have settled", async () => {
    // Arrange: a /31 with one address claimed already; one pass holds the last free one
    const claims = new InMemoryClaimStore();
    const pool = VipPool.parse("240.0.0.0/31");
    await claims.claimAddress({
      service: "a",
      candidate: { vip: "240.0.0.0", offset: 0n },
      mesh: "m",
      membership,
      nowMs: 0,
      reclaimCutoffMs: 0,
    });
    const finder = new AddressFinder(claims, pool, () => 0, 3600);
    const held = await finder.next();
    expect(held?.vip).toBe("240.0.0.1");

    // Act: another pass asks while the candidate is in flight, then the holder gives it back
    const waiting = finder.next();
    const raced = await Promise.race([
      waiting,
      new Promise((r) => setTimeout(() => r("pending"), 20)),
    ]);
    if (held !== undefined) finder.returned(held);

    // Assert
    expect(raced).toBe("pending");
    expect((await waiting)?.vip).toBe("240.0.0.1");
  });

  it("says the range is full when every address is claimed and none is past its quarantine", async () => {
    // Arrange
    const claims = new InMemoryClaimStore();
    const pool = VipPool.parse("240.0.0.0/31");
    await claims.claimAddress({
      service: "a",
      candidate: { vip: "240.0.0.0", offset: 0n },
      mesh: "m",
      membership,
      nowMs: 0,
      reclaimCutoffMs: 0,
    });
    await claims.claimAddress({
      service: "b",
      candidate: { vip: "240.0.0.1", offset: 1n },
      mesh: "m",
      membership,
      nowMs: 0,
      reclaimCutoffMs: 0,
    });
    const finder = new AddressFinder(claims, pool, () => 0, 3600);

    // Act / Assert
    expect(await finder.next()).toBeUndefined();
  });
});
