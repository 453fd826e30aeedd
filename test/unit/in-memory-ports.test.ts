import { describe, expect, it } from "vitest";
import type { VipItem } from "../../functions/domain/types.ts";
import { Gate, InMemoryVipItemStore } from "../fixtures/in-memory-ports.ts";

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
