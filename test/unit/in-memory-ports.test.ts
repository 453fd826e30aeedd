/**
 * The in-memory doubles of the store ports: the store contract the DynamoDB adapters run
 * (test/fixtures/store-contract.ts, every method of every port), what only the doubles do (the
 * Gate that holds a request), and where they must fail as DynamoDB does.
 */
import { describe, expect, it } from "vitest";
import type { VipItem } from "../../functions/domain/types.ts";
import { Gate, InMemoryClaimStore, InMemoryVipItemStore } from "../fixtures/in-memory-ports.ts";
import { inMemoryStores } from "../fixtures/in-memory-stores.ts";
import { addressClaim, at, claimNew, leave, storeContract } from "../fixtures/store-contract.ts";

storeContract("in memory", inMemoryStores);

function vipItem(version: number, vips: Record<string, string> = {}): VipItem {
  return { mesh: "m", version, vips, cidr: "10.0.0.0/30", updatedAt: "t", incarnation: "i1" };
}

describe("Gate", () => {
  it("holds the chosen request until released, and lets the others through", async () => {
    // Arrange
    const gate = new Gate();
    const store = new InMemoryVipItemStore(gate.pause);
    const held = gate.holdNext("vips.put");
    let written = false;

    // Act
    const put = store.put(vipItem(1), undefined).then(() => {
      written = true;
    });
    await held.reached;
    const read = await store.get("m");

    // Assert
    expect(read).toBeUndefined();
    expect(written).toBe(false);
    held.release();
    await put;
    expect(written).toBe(true);
  });
});

describe("InMemoryClaimStore", () => {
  it("rejects a transaction that names one item twice, as DynamoDB does", async () => {
    // Arrange
    const claims = new InMemoryClaimStore();
    await claimNew(claims, "a", at("10.0.0.0", 0), "m", 1, 0);
    await leave(claims, "a", "m", "i1", 1, 0);
    const previous = await addressClaim(claims, "10.0.0.0");

    // Act
    const attempt = claimNew(claims, "a", at("10.0.0.0", 0, previous), "m", 10, 10);

    // Assert
    await expect(attempt).rejects.toThrow(/ValidationException/);
  });
});
