import { describe, expect, it } from "vitest";
import type { VipItem } from "../../functions/domain/types.ts";
import {
  decodeAllocatorItem,
  decodeVipItem,
  encodeVipItem,
  ITEM_MAX_BYTES,
  PLAIN_FORMAT_MAX_BYTES,
} from "../../functions/store/vip-item-codec.ts";

function item(services: number, extra: Partial<VipItem> = {}): VipItem {
  const vips: Record<string, string> = {};
  for (let i = 0; i < services; i++) {
    vips[`web-${i}_kuma-demo_svc_${8000 + (i % 100)}`] =
      `240.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  }
  return {
    mesh: "big",
    version: 7,
    vips,
    cidr: "240.0.0.0/4",
    updatedAt: "2026-12-02T00:00:00.000Z",
    incarnation: "inc-1",
    ...extra,
  };
}

describe("VIP item codec", () => {
  it("stores services and hosts still pending apart, in both formats (decision 160)", () => {
    for (const size of [10, 2_000]) {
      const pending = item(size, { pending: ["late", "host/api.example.com"] });

      const { stored } = encodeVipItem(pending);

      const raw = stored.format === 2 ? undefined : stored;
      if (raw !== undefined) {
        expect(raw.pending).toEqual(["late"]);
        expect(raw.pendingHosts).toEqual(["api.example.com"]);
      }
      expect(stored.format).toBe(size > 1_000 ? 2 : undefined);
      const decoded = decodeVipItem(stored);
      expect(decoded.pending).toEqual(["late"]);
      expect(decoded.pendingHosts).toEqual(["api.example.com"]);
      expect(decodeAllocatorItem(stored).pending).toEqual(["late", "host/api.example.com"]);
    }
  });

  it("keeps the plain format, vips as a map, for an ordinary mesh", () => {
    const small = item(100, { unallocated: { late: "range exhausted" } });

    const { stored, bytes } = encodeVipItem(small);

    expect(stored.format).toBeUndefined();
    expect(stored.vips).toEqual(small.vips);
    expect(stored.unallocated).toEqual({ late: "range exhausted" });
    expect(bytes).toBeLessThanOrEqual(PLAIN_FORMAT_MAX_BYTES);
    expect(decodeVipItem(stored)).toEqual(small);
  });

  it("switches to the compact format 2 above the plain budget and reads it back", () => {
    const large = item(3_000);

    const { stored, bytes } = encodeVipItem(large);

    expect(stored.format).toBe(2);
    expect(stored.vips).toBeUndefined();
    expect(stored.serviceCount).toBe(3_000);
    expect(bytes).toBeLessThan(PLAIN_FORMAT_MAX_BYTES);
    expect(decodeVipItem(stored)).toEqual(large);
  });

  it("holds 20,000 services well under DynamoDB's 400 KB item limit", () => {
    const huge = item(20_000, { unallocated: { x: "range exhausted" } });

    const { stored, bytes } = encodeVipItem(huge);

    expect(bytes).toBeLessThan(ITEM_MAX_BYTES);
    expect(decodeVipItem(stored)).toEqual(huge);
  });
});
