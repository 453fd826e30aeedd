import { describe, expect, it } from "vitest";
import { InvalidCidrError } from "../../functions/domain/errors.ts";
import { VipPool } from "../../functions/domain/pool.ts";

describe("VipPool.parse", () => {
  it.each([
    { input: "240.0.0.0/4", cidr: "240.0.0.0/4", kind: "ipv4", prefix: 4, size: 2n ** 28n },
    { input: "10.0.0.0/8", cidr: "10.0.0.0/8", kind: "ipv4", prefix: 8, size: 2n ** 24n },
    { input: "10.0.0.0/29", cidr: "10.0.0.0/29", kind: "ipv4", prefix: 29, size: 8n },
    { input: "fd00::/64", cidr: "fd00::/64", kind: "ipv6", prefix: 64, size: 2n ** 64n },
    { input: "fd00::/120", cidr: "fd00::/120", kind: "ipv6", prefix: 120, size: 256n },
  ])("parses $input as a $kind range of $size addresses", ({ input, cidr, kind, prefix, size }) => {
    // Act
    const pool = VipPool.parse(input);

    // Assert
    expect(pool.cidr).toBe(cidr);
    expect(pool.kind).toBe(kind);
    expect(pool.prefixLength).toBe(prefix);
    expect(pool.size).toBe(size);
  });

  it.each([
    {
      input: "240.0.0.7/4",
      message:
        'invalid VIP range "240.0.0.7/4": host bits set: 240.0.0.7 is not the first address of a /4 range (did you mean 240.0.0.0/4?)',
    },
    {
      input: "fd00:0:0:0::1:5/112",
      message:
        'invalid VIP range "fd00:0:0:0::1:5/112": host bits set: fd00::1:5 is not the first address of a /112 range (did you mean fd00::1:0/112?)',
    },
    {
      input: "240.0.0.0/99",
      message:
        'invalid VIP range "240.0.0.0/99": prefix length /99 is too long: an IPv4 range has at most /32',
    },
    {
      input: "fd00::/129",
      message:
        'invalid VIP range "fd00::/129": prefix length /129 is too long: an IPv6 range has at most /128',
    },
  ])("refuses $input in the project's own words", ({ input, message }) => {
    // Act
    const attempt = () => VipPool.parse(input);

    // Assert
    expect(attempt).toThrow(new InvalidCidrError(input, message.split(": ").slice(1).join(": ")));
    expect(attempt).toThrow(message);
  });

  it("takes a compact IPv6 network address as written", () => {
    // Act
    const pool = VipPool.parse("fd00:0:0:0::1:0/112");

    // Assert
    expect(pool.cidr).toBe("fd00::1:0/112");
  });

  it.each([
    "",
    "240.0.0.0",
    "300.0.0.0/4",
    "240.0.0.0/33",
    "fd00::/129",
    "garbage",
    "240.0.0.0/4/5",
    "::ffff:240.0.0.0/100",
  ])("rejects %j with an InvalidCidrError naming the input", (input) => {
    // Act
    const attempt = () => VipPool.parse(input);

    // Assert
    expect(attempt).toThrow(InvalidCidrError);
    try {
      attempt();
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidCidrError);
      const cidrError = error as InvalidCidrError;
      expect(cidrError.code).toBe("INVALID_CIDR");
      expect(cidrError.input).toBe(input);
      expect(cidrError.message).toContain(JSON.stringify(input));
    }
  });
});

describe("VipPool addresses", () => {
  it("hands out the network address first, as Kuma does with 240.0.0.0", () => {
    // Arrange
    const pool = VipPool.parse("240.0.0.0/4");

    // Act
    const first = pool.addressAt(0n);
    const second = pool.addressAt(1n);

    // Assert
    expect(first).toBe("240.0.0.0");
    expect(second).toBe("240.0.0.1");
  });

  it("addresses the last offset of the range and no further", () => {
    // Arrange
    const pool = VipPool.parse("10.0.0.0/29");

    // Act
    const last = pool.addressAt(7n);

    // Assert
    expect(last).toBe("10.0.0.7");
    expect(() => pool.addressAt(8n)).toThrow(RangeError);
    expect(() => pool.addressAt(-1n)).toThrow(RangeError);
  });

  it("crosses octet boundaries in a wide IPv4 range", () => {
    // Arrange
    const pool = VipPool.parse("240.0.0.0/4");

    // Act
    const vip = pool.addressAt(256n + 7n);

    // Assert
    expect(vip).toBe("240.0.1.7");
    expect(pool.addressAt(pool.size - 1n)).toBe("255.255.255.255");
  });

  it("gives IPv6 addresses in compact form", () => {
    // Arrange
    const pool = VipPool.parse("fd00::/64");

    // Act
    const vip = pool.addressAt(0x12n);

    // Assert
    expect(vip).toBe("fd00::12");
    expect(pool.addressAt(pool.size - 1n)).toBe("fd00::ffff:ffff:ffff:ffff");
  });

  it("finds the offset of an address inside the range", () => {
    // Arrange
    const pool = VipPool.parse("240.0.0.0/4");

    // Act
    const offset = pool.offsetOf("240.0.1.7");

    // Assert
    expect(offset).toBe(263n);
  });

  it.each([
    { pool: "10.0.0.0/29", vip: "10.0.0.8", why: "just past the range" },
    { pool: "10.0.0.8/29", vip: "10.0.0.7", why: "just before the range" },
    { pool: "240.0.0.0/4", vip: "fd00::1", why: "of the other family" },
    { pool: "fd00::/120", vip: "240.0.0.1", why: "of the other family" },
    { pool: "fd00::/120", vip: "fd00::100", why: "just past an IPv6 range" },
    { pool: "240.0.0.0/4", vip: "not-an-ip", why: "not an address" },
    { pool: "240.0.0.0/4", vip: "", why: "empty" },
  ])("gives no offset for $vip in $pool ($why)", ({ pool: cidr, vip }) => {
    // Arrange
    const pool = VipPool.parse(cidr);

    // Act
    const offset = pool.offsetOf(vip);

    // Assert
    expect(offset).toBeUndefined();
    expect(pool.contains(vip)).toBe(false);
    expect(pool.canonical(vip)).toBeUndefined();
  });

  it("contains the first and last addresses of the range", () => {
    // Arrange
    const pool = VipPool.parse("10.0.0.8/29");

    // Act
    const first = pool.contains("10.0.0.8");
    const last = pool.contains("10.0.0.15");

    // Assert
    expect(first).toBe(true);
    expect(last).toBe(true);
  });

  it("canonicalises an IPv6 VIP so equal addresses compare equal", () => {
    // Arrange
    const pool = VipPool.parse("fd00::/64");

    // Act
    const canonical = pool.canonical("fd00:0:0:0:0:0:0:12");

    // Assert
    expect(canonical).toBe("fd00::12");
    expect(pool.canonical("FD00::12")).toBe("fd00::12");
  });

  it("keeps a canonical IPv4 VIP as it is", () => {
    // Arrange
    const pool = VipPool.parse("240.0.0.0/4");

    // Act
    const canonical = pool.canonical("240.0.0.7");

    // Assert
    expect(canonical).toBe("240.0.0.7");
  });
});

describe("VipPool.probeOrder", () => {
  it("visits every offset once, starting at the cursor and wrapping", () => {
    // Arrange
    const pool = VipPool.parse("10.0.0.0/29");

    // Act
    const order = [...pool.probeOrder(5n)];

    // Assert
    expect(order).toEqual([5n, 6n, 7n, 0n, 1n, 2n, 3n, 4n]);
  });

  it.each([0n, 1n, 7n])("visits all 8 offsets of a /29 exactly once from cursor %s", (cursor) => {
    // Arrange
    const pool = VipPool.parse("10.0.0.0/29");

    // Act
    const order = [...pool.probeOrder(cursor)];

    // Assert
    expect(order[0]).toBe(cursor);
    expect(order).toHaveLength(8);
    expect(new Set(order).size).toBe(8);
    expect([...order].sort((a, b) => Number(a - b))).toEqual([0n, 1n, 2n, 3n, 4n, 5n, 6n, 7n]);
  });

  it.each([8n, 100n, -1n])("starts from 0 when the cursor %s lies outside the range", (cursor) => {
    // Arrange
    const pool = VipPool.parse("10.0.0.0/30");

    // Act
    const order = [...pool.probeOrder(cursor)];

    // Assert
    expect(order).toEqual([0n, 1n, 2n, 3n]);
  });

  it("is lazy, so a /4 costs nothing to start probing", () => {
    // Arrange
    const pool = VipPool.parse("240.0.0.0/4");

    // Act
    const order = pool.probeOrder(pool.size - 2n);
    const firstFour = [
      order.next().value,
      order.next().value,
      order.next().value,
      order.next().value,
    ];

    // Assert
    expect(firstFour).toEqual([pool.size - 2n, pool.size - 1n, 0n, 1n]);
  });
});
