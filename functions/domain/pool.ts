import ipaddr from "ipaddr.js";
import { InvalidCidrError } from "./errors.ts";

type Address = ipaddr.IPv4 | ipaddr.IPv6;

function toBigInt(bytes: readonly number[]): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value;
}

function toBytes(value: bigint, length: number): number[] {
  const bytes = new Array<number>(length).fill(0);
  let rest = value;
  for (let i = length - 1; i >= 0; i--) {
    bytes[i] = Number(rest & 0xffn);
    rest >>= 8n;
  }
  return bytes;
}

/**
 * A VIP range (IPv4 or IPv6 CIDR) seen as offsets 0..size-1 from its network address.
 *
 * Every address of the range is allocatable, the network address included, as in Kuma
 * (`240.0.0.0` is the first VIP): VIPs are never routed, so there is no broadcast to avoid.
 * Offsets are bigints so a `/64` or wider IPv6 range works without precision loss.
 */
export class VipPool {
  /** Canonical form, `network/prefix`, e.g. `240.0.0.0/4`. */
  readonly cidr: string;
  readonly kind: "ipv4" | "ipv6";
  readonly prefixLength: number;
  readonly size: bigint;
  private readonly base: bigint;
  private readonly byteLength: number;

  private constructor(network: Address, prefixLength: number) {
    this.kind = network.kind();
    this.prefixLength = prefixLength;
    this.byteLength = this.kind === "ipv4" ? 4 : 16;
    const bits = this.byteLength * 8;
    this.size = 1n << BigInt(bits - prefixLength);
    const raw = toBigInt(network.toByteArray());
    this.base = (raw >> BigInt(bits - prefixLength)) << BigInt(bits - prefixLength);
    this.cidr = `${this.addressAt(0n)}/${prefixLength}`;
  }

  /**
   * Parses `VIP_CIDR`: a network address and its prefix (host bits clear, decision 144). Throws
   * {@link InvalidCidrError} naming the value and what is wrong with it.
   */
  static parse(input: string): VipPool {
    const text = input.trim();
    if (!text.includes("/")) {
      throw new InvalidCidrError(input, "expected address/prefix, e.g. 240.0.0.0/4 or fd00::/64");
    }
    const [addressText = "", prefixText = ""] = text.split("/");
    if (!/^\d{1,3}$/.test(prefixText)) {
      throw new InvalidCidrError(
        input,
        `prefix length ${JSON.stringify(prefixText)} is not a number`,
      );
    }
    const ipv4 = /^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$/;
    const ipv6 = /^[0-9A-Fa-f:.]+$/;
    if (!ipv4.test(addressText) && !(addressText.includes(":") && ipv6.test(addressText))) {
      // ipaddr.js also accepts octal (010.0.0.0), hex and shorthand (1.2.3) forms and IPv6
      // zone ids; a range must be written plainly, so none of these is taken.
      throw new InvalidCidrError(
        input,
        "expected a dotted-decimal IPv4 (no leading zeros) or an IPv6 address before the /",
      );
    }
    const bits = addressText.includes(":") ? 128 : 32;
    const prefix = Number(prefixText);
    if (prefix > bits) {
      throw new InvalidCidrError(
        input,
        `prefix length /${prefix} is too long: an ${bits === 32 ? "IPv4" : "IPv6"} range has at most /${bits}`,
      );
    }
    let parsed: [Address, number];
    try {
      parsed = ipaddr.parseCIDR(text);
    } catch (error) {
      throw new InvalidCidrError(input, error instanceof Error ? error.message : String(error));
    }
    const [address] = parsed;
    if (address.kind() === "ipv6" && (address as ipaddr.IPv6).isIPv4MappedAddress()) {
      throw new InvalidCidrError(input, "IPv4-mapped IPv6 ranges are not supported");
    }
    const pool = new VipPool(address, prefix);
    if (pool.base !== toBigInt(address.toByteArray())) {
      // 240.0.0.7/4 is most likely a typing slip: the range is not taken as 240.0.0.0/4 silently.
      throw new InvalidCidrError(
        input,
        `host bits set: ${address.toString()} is not the first address of a /${prefix} range (did you mean ${pool.cidr}?)`,
      );
    }
    return pool;
  }

  /** The address at `offset` (0 = network address). */
  addressAt(offset: bigint): string {
    if (offset < 0n || offset >= this.size) {
      throw new RangeError(`offset ${offset} outside ${this.cidr ?? "pool"} (size ${this.size})`);
    }
    const bytes = toBytes(this.base + offset, this.byteLength);
    return ipaddr.fromByteArray(bytes).toString();
  }

  /**
   * The offset of `vip` in this range, or undefined when it is not a valid address of this
   * family inside the range (an out-of-range VIP, e.g. after a `VIP_CIDR` change).
   */
  offsetOf(vip: string): bigint | undefined {
    if (!ipaddr.isValid(vip)) return undefined;
    const address = ipaddr.parse(vip);
    if (address.kind() !== this.kind) return undefined;
    const value = toBigInt(address.toByteArray());
    const offset = value - this.base;
    return offset >= 0n && offset < this.size ? offset : undefined;
  }

  contains(vip: string): boolean {
    return this.offsetOf(vip) !== undefined;
  }

  /** The canonical text of an address (so `fd00:0::12` and `fd00::12` compare equal). */
  canonical(vip: string): string | undefined {
    const offset = this.offsetOf(vip);
    return offset === undefined ? undefined : this.addressAt(offset);
  }

  /**
   * Offsets to probe for a free address, next-fit: from `cursor` to the end of the range,
   * then wrapping to the start, never more than one full cycle. Lazy, so a /4 costs nothing.
   */
  *probeOrder(cursor: bigint): Generator<bigint> {
    const start = cursor >= 0n && cursor < this.size ? cursor : 0n;
    for (let offset = start; offset < this.size; offset++) yield offset;
    for (let offset = 0n; offset < start; offset++) yield offset;
  }
}

/**
 * The quarantine rule, in one place: a VIP freed by a service that left every mesh goes to
 * another service only `quarantineSeconds` after its release (invariant 8), so a cached DNS
 * answer or sidecar config cannot reach the wrong service.
 */

/**
 * Whether an address released now is free for another service at once (no quarantine): then a
 * pass that frees one wakes the meshes waiting for an address.
 */
export function freedAtOnce(quarantineSeconds: number): boolean {
  return quarantineSeconds === 0;
}

/** The latest release time whose quarantine is over at `nowMs`. */
export function reclaimCutoffMs(nowMs: number, quarantineSeconds: number): number {
  return nowMs - quarantineSeconds * 1000;
}

/** Whether a claim released at `releasedAtMs` may go to another service at `nowMs`. */
export function quarantineOver(
  releasedAtMs: number,
  nowMs: number,
  quarantineSeconds: number,
): boolean {
  return releasedAtMs <= reclaimCutoffMs(nowMs, quarantineSeconds);
}
