import { describe, expect, it } from "vitest";
import { VersionConflictError } from "../../functions/domain/errors.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import {
  Gate,
  InMemoryClaimStore,
  InMemoryVipItemStore,
  SimulatedValidationError,
} from "../fixtures/in-memory-ports.ts";

const member = { incarnation: "i1", version: 1 };

function vipItem(version: number, vips: Record<string, string> = {}): VipItem {
  return { mesh: "m", version, vips, cidr: "10.0.0.0/30", updatedAt: "t", incarnation: "i1" };
}

describe("InMemoryVipItemStore (mirrors DynamoVipItemStore)", () => {
  it("creates an item only when none exists", async () => {
    // Arrange
    const store = new InMemoryVipItemStore();
    await store.put(vipItem(1), undefined);

    // Act
    const again = store.put(vipItem(1), undefined);

    // Assert
    await expect(again).rejects.toBeInstanceOf(VersionConflictError);
  });

  it("writes over the version it was given, and only that one", async () => {
    // Arrange
    const store = new InMemoryVipItemStore();
    await store.put(vipItem(1), undefined);

    // Act
    const stale = store.put(vipItem(2, { a: "10.0.0.1" }), 0);
    const size = await store.put(vipItem(2, { a: "10.0.0.0" }), 1);

    // Assert
    await expect(stale).rejects.toBeInstanceOf(VersionConflictError);
    expect(size).toBeGreaterThan(0);
    expect(await store.get("m")).toMatchObject({ version: 2, vips: { a: "10.0.0.0" } });
  });

  it("deletes only the version it was given", async () => {
    // Arrange
    const store = new InMemoryVipItemStore();
    await store.put(vipItem(1), undefined);

    // Act
    const stale = store.delete("m", 2);
    const missing = store.delete("other", 1);

    // Assert
    await expect(stale).rejects.toBeInstanceOf(VersionConflictError);
    await expect(missing).rejects.toBeInstanceOf(VersionConflictError);
    await store.delete("m", 1);
    expect(await store.get("m")).toBeUndefined();
  });

  it("stores a mesh beyond 64 KB in the adapter's compact format and reads it back whole", async () => {
    // Arrange
    const vips = Object.fromEntries(
      Array.from({ length: 3000 }, (_, i) => [`service-${i}`, `10.0.${i >> 8}.${i & 255}`]),
    );

    // Act
    const store = new InMemoryVipItemStore();
    const bytes = await store.put(vipItem(1, vips), undefined);

    // Assert
    expect(bytes).toBeLessThan(64 * 1024);
    expect(store.peek("m")?.vips).toEqual(vips);
  });

  it("returns copies that do not alias the stored item", async () => {
    // Arrange
    const store = new InMemoryVipItemStore();
    await store.put(vipItem(1, { a: "10.0.0.0" }), undefined);

    // Act
    const read = await store.get("m");
    (read?.vips as Record<string, string>).a = "changed";

    // Assert
    expect(store.peek("m")?.vips).toEqual({ a: "10.0.0.0" });
  });
});

describe("InMemoryClaimStore (mirrors DynamoClaimStore)", () => {
  it("claims an address and a service together, and neither when one is taken", async () => {
    // Arrange
    const store = new InMemoryClaimStore();
    await store.claimNew("a", { vip: "10.0.0.0", offset: 0n }, "m", member, 1, 0);

    // Act
    const addressTaken = await store.claimNew(
      "b",
      { vip: "10.0.0.0", offset: 0n },
      "m",
      member,
      1,
      0,
    );
    const serviceTaken = await store.claimNew(
      "a",
      { vip: "10.0.0.1", offset: 1n },
      "m",
      member,
      1,
      0,
    );

    // Assert
    expect(addressTaken).toBe("address-taken");
    expect(serviceTaken).toBe("service-changed");
    expect(store.serviceClaims().map((c) => c.service)).toEqual(["a"]);
    expect(store.addressClaims().map((c) => c.vip)).toEqual(["10.0.0.0"]);
  });

  it("releases a service, on both claims, when its last mesh leaves", async () => {
    // Arrange
    const store = new InMemoryClaimStore();
    await store.claimNew("a", { vip: "10.0.0.0", offset: 0n }, "m1", member, 1, 0);
    await store.join("a", "10.0.0.0", "m2", member, false);

    // Act
    const wrongIncarnation = await store.leave("a", "m1", "other", 9, 50);
    const tooOld = await store.leave("a", "m1", "i1", 0, 50);
    const first = await store.leave("a", "m1", "i1", 1, 50);
    const last = await store.leave("a", "m2", "i1", 1, 60);

    // Assert
    expect([wrongIncarnation, tooOld, first, last]).toEqual(["kept", "kept", "left", "released"]);
    expect(store.serviceClaim("a")?.releasedAt).toBe(60);
    expect(store.addressClaim("10.0.0.0")?.releasedAt).toBe(60);
  });

  it("joins a released claim only as released, ending its quarantine", async () => {
    // Arrange
    const store = new InMemoryClaimStore();
    await store.claimNew("a", { vip: "10.0.0.0", offset: 0n }, "m", member, 1, 0);
    await store.leave("a", "m", "i1", 1, 50);

    // Act
    const asLive = await store.join("a", "10.0.0.0", "m", { incarnation: "i1", version: 2 }, false);
    const asReleased = await store.join(
      "a",
      "10.0.0.0",
      "m",
      { incarnation: "i1", version: 2 },
      true,
    );

    // Assert
    expect(asLive).toBe(false);
    expect(asReleased).toBe(true);
    expect(store.serviceClaim("a")?.releasedAt).toBeUndefined();
    expect(store.addressClaim("10.0.0.0")?.releasedAt).toBeUndefined();
  });

  it("reclaims a released address only after the cutoff, deleting the old service claim", async () => {
    // Arrange
    const store = new InMemoryClaimStore();
    await store.claimNew("a", { vip: "10.0.0.0", offset: 0n }, "m", member, 1, 0);
    await store.leave("a", "m", "i1", 1, 1000);
    const previous = store.addressClaim("10.0.0.0");
    const candidate = {
      vip: "10.0.0.0",
      offset: 0n,
      ...(previous ? { reclaimFrom: previous } : {}),
    };

    // Act
    const early = await store.claimNew("b", candidate, "m", member, 1500, 999);
    const due = await store.claimNew("b", candidate, "m", member, 2500, 1000);

    // Assert
    expect(early).toBe("address-taken");
    expect(due).toBe("ok");
    expect(store.serviceClaim("a")).toBeUndefined();
    expect(store.addressClaim("10.0.0.0")).toMatchObject({ owner: "b", releasedAt: undefined });
  });

  it("rejects a transaction that names one item twice, as DynamoDB does", async () => {
    // Arrange
    const store = new InMemoryClaimStore();
    await store.claimNew("a", { vip: "10.0.0.0", offset: 0n }, "m", member, 1, 0);
    await store.leave("a", "m", "i1", 1, 0);
    const previous = store.addressClaim("10.0.0.0");
    const own = { vip: "10.0.0.0", offset: 0n, ...(previous ? { reclaimFrom: previous } : {}) };

    // Act
    const attempt = store.claimNew("a", own, "m", member, 10, 10);

    // Assert
    await expect(attempt).rejects.toBeInstanceOf(SimulatedValidationError);
  });

  it("moves a claim to a new address and keeps the old one owned by the service", async () => {
    // Arrange
    const store = new InMemoryClaimStore();
    await store.claimNew("a", { vip: "10.0.0.0", offset: 0n }, "m", member, 1, 0);

    // Act
    const moved = await store.moveClaim(
      "a",
      "10.0.0.0",
      { vip: "10.0.1.0", offset: 0n },
      "m",
      { incarnation: "i1", version: 2 },
      5,
      0,
    );

    // Assert
    expect(moved).toBe("ok");
    expect(store.serviceClaim("a")?.vip).toBe("10.0.1.0");
    expect(store.addressClaim("10.0.0.0")?.owner).toBe("a");
    expect(store.addressClaim("10.0.1.0")?.owner).toBe("a");
  });

  it("keeps the cursor and the claim count of each range", async () => {
    // Arrange
    const store = new InMemoryClaimStore();

    // Act
    const fresh = await store.readCursor("10.0.0.0/30");
    const count = await store.advanceCursor("10.0.0.0/30", 3n, 2);
    const again = await store.advanceCursor("10.0.0.0/30", 0n, 1);

    // Assert
    expect(fresh).toBe(0n);
    expect(count).toBe(2);
    expect(again).toBe(3);
    expect(await store.readCursor("10.0.0.0/30")).toBe(0n);
    expect(await store.readCursor("10.0.0.0/29")).toBe(0n);
  });
});

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
