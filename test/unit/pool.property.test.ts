import fc from "fast-check";
import ipaddr from "ipaddr.js";
import { describe, expect, it } from "vitest";
import { VipPool } from "../../functions/domain/pool.ts";

/** `address/prefix` with the host bits of the address cleared (a range VipPool.parse takes). */
const network = (address: string, prefix: number): string => {
  const cidr = `${address}/${prefix}`;
  const first = address.includes(":")
    ? ipaddr.IPv6.networkAddressFromCIDR(cidr)
    : ipaddr.IPv4.networkAddressFromCIDR(cidr);
  return `${first.toString()}/${prefix}`;
};

/** A random range of either family: any network address, any prefix. */
const rangeArb = fc.oneof(
  fc
    .tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 }))
    .map(([address, prefix]) => VipPool.parse(network(address, prefix))),
  fc
    .tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 }))
    // IPv4-mapped ranges are rejected by design (see pool.test.ts).
    .filter(([address]) => !ipaddr.IPv6.parse(address).isIPv4MappedAddress())
    .map(([address, prefix]) => VipPool.parse(network(address, prefix))),
);

/** A range with offsets inside it (drawn as fractions of the size, so /0 and /128 both work). */
const rangeWithOffsets = rangeArb.chain((pool) =>
  fc
    .array(fc.bigInt({ min: 0n, max: pool.size - 1n }), { minLength: 1, maxLength: 20 })
    .map((offsets) => ({ pool, offsets })),
);

describe("VipPool properties", () => {
  it("maps every offset to an address and back to the same offset", () => {
    fc.assert(
      fc.property(rangeWithOffsets, ({ pool, offsets }) => {
        for (const offset of offsets) {
          // Act
          const vip = pool.addressAt(offset);

          // Assert
          expect(pool.offsetOf(vip)).toBe(offset);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("gives distinct addresses for distinct offsets", () => {
    fc.assert(
      fc.property(rangeWithOffsets, ({ pool, offsets }) => {
        // Act
        const unique = [...new Set(offsets)];
        const vips = unique.map((offset) => pool.addressAt(offset));

        // Assert
        expect(new Set(vips).size).toBe(unique.length);
      }),
      { numRuns: 300 },
    );
  });

  it("contains every address it produces, in canonical form", () => {
    fc.assert(
      fc.property(rangeWithOffsets, ({ pool, offsets }) => {
        for (const offset of offsets) {
          // Act
          const vip = pool.addressAt(offset);

          // Assert
          expect(pool.contains(vip)).toBe(true);
          expect(pool.canonical(vip)).toBe(vip);
        }
      }),
      { numRuns: 300 },
    );
  });

  it("parses its own canonical form to the same range", () => {
    fc.assert(
      fc.property(rangeArb, (pool) => {
        // Act
        const again = VipPool.parse(pool.cidr);

        // Assert
        expect(again.cidr).toBe(pool.cidr);
        expect(again.size).toBe(pool.size);
        expect(again.addressAt(0n)).toBe(pool.addressAt(0n));
      }),
      { numRuns: 300 },
    );
  });

  it("visits every offset exactly once from any cursor of a small range", () => {
    const smallRange = fc
      .tuple(fc.ipV4(), fc.integer({ min: 24, max: 32 }))
      .map(([address, prefix]) => VipPool.parse(network(address, prefix)))
      .chain((pool) => fc.tuple(fc.constant(pool), fc.bigInt({ min: 0n, max: pool.size - 1n })));
    fc.assert(
      fc.property(smallRange, ([pool, cursor]) => {
        // Act
        const order = [...pool.probeOrder(cursor)];

        // Assert
        expect(order[0]).toBe(cursor);
        expect(order).toHaveLength(Number(pool.size));
        expect(new Set(order).size).toBe(Number(pool.size));
        order.forEach((offset, index) => {
          expect(offset).toBe((cursor + BigInt(index)) % pool.size);
        });
      }),
      { numRuns: 100 },
    );
  });
});
