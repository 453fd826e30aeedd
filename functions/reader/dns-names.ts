/**
 * The names the DNS responder serves, built from a snapshot. Pure: no sockets.
 *
 * - `<service>.<domain>` answers A (IPv4 VIP) or AAAA (IPv6 VIP);
 * - the Kuma variant, `_` replaced by `.` (`backend_kuma-demo_svc_8080` ->
 *   `backend.kuma-demo.svc.8080.<domain>`), answers the same;
 * - an external service's host answers under its own name (`api.example.com`, not under the
 *   domain) with the host's VIP;
 * - the reverse name of a VIP (`7.0.0.240.in-addr.arpa`, nibbles under `ip6.arpa`) answers PTR
 *   with the name the service (or the host) resolves under.
 *
 * Names are case-insensitive (kept lowercase). Two services whose names collide after
 * lowercasing or the `_` rewrite are resolved deterministically: an exact name beats a
 * rewritten one, then the smaller service name (code-unit order) wins; every collision is
 * listed in {@link NameTable.collisions}. A host whose name a service's name already takes is
 * listed there too (as the loser `host/<host>`): services keep their names.
 */
import ipaddr from "ipaddr.js";
import { VipPool } from "../domain/pool.ts";
import type { VipSnapshot } from "./snapshot.ts";

export type DnsStatus = "NOERROR" | "NXDOMAIN" | "REFUSED";
export type AnswerType = "A" | "AAAA" | "PTR";

export interface DnsAnswer {
  /** The owner name, lowercase, without the trailing dot. */
  readonly name: string;
  readonly type: AnswerType;
  readonly data: string;
}

export interface Resolution {
  readonly status: DnsStatus;
  readonly answers: readonly DnsAnswer[];
}

/** A name two or more services want; `winner` gets it. */
export interface NameCollision {
  readonly name: string;
  readonly winner: string;
  readonly losers: readonly string[];
}

interface NameEntry {
  readonly service: string;
  /** Reached through the `_` -> `.` rewrite. */
  readonly rewritten: boolean;
}

const LABEL = /^[a-z0-9_:-]{1,63}$/;

/** A lowercase DNS name without the trailing dot, or undefined if it is not one we can serve. */
export function dnsName(text: string): string | undefined {
  const name = text.toLowerCase().replace(/\.$/, "");
  if (name.length === 0 || name.length > 253) return undefined;
  return name.split(".").every((label) => LABEL.test(label)) ? name : undefined;
}

/** Checks a `--domain`: a lowercase DNS name (e.g. `mesh`, `svc.cluster.local`). */
export function normalizeDomain(domain: string): string {
  const name = dnsName(domain.trim());
  if (name === undefined || name.endsWith(".arpa") || name === "arpa") {
    throw new Error(`domain ${JSON.stringify(domain)} is not a DNS name (labels of a-z 0-9 - _)`);
  }
  return name;
}

/** The Kuma variant of a service name (`_` -> `.`), or undefined when it has no `_`. */
export function kumaVariant(service: string): string | undefined {
  return service.includes("_") ? service.replaceAll("_", ".") : undefined;
}

/** The reverse name of an address: `in-addr.arpa` for IPv4, nibbles under `ip6.arpa`. */
export function reverseName(vip: string): string {
  const address = ipaddr.parse(vip);
  const bytes = address.toByteArray();
  if (address.kind() === "ipv4") return `${[...bytes].reverse().join(".")}.in-addr.arpa`;
  const nibbles: string[] = [];
  for (const byte of bytes) nibbles.push((byte >> 4).toString(16), (byte & 15).toString(16));
  return `${nibbles.reverse().join(".")}.ip6.arpa`;
}

/** The address a full reverse name stands for (canonical text), or undefined. */
export function addressOfReverseName(name: string): string | undefined {
  const lower = name.toLowerCase().replace(/\.$/, "");
  if (lower.endsWith(".in-addr.arpa")) {
    const parts = lower.slice(0, -".in-addr.arpa".length).split(".");
    if (
      parts.length !== 4 ||
      !parts.every((p) => /^(0|[1-9]\d{0,2})$/.test(p) && Number(p) < 256)
    ) {
      return undefined;
    }
    return parts.reverse().join(".");
  }
  if (lower.endsWith(".ip6.arpa")) {
    const nibbles = lower.slice(0, -".ip6.arpa".length).split(".");
    if (nibbles.length !== 32 || !nibbles.every((n) => /^[0-9a-f]$/.test(n))) return undefined;
    const hex = nibbles.reverse().join("");
    const groups = hex.match(/.{4}/g) as string[];
    return ipaddr.parse(groups.join(":")).toString();
  }
  return undefined;
}

const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Exact beats rewritten; then the smaller service name. */
function better(a: NameEntry, b: NameEntry): boolean {
  if (a.rewritten !== b.rewritten) return !a.rewritten;
  return a.service < b.service;
}

export interface NameTableOptions {
  /** The zone served, e.g. `mesh`. */
  readonly domain: string;
  /** Extra VIP ranges whose reverse names get NXDOMAIN rather than REFUSED (e.g. VIP_CIDR). */
  readonly ranges?: readonly string[];
}

/** Every name the responder answers, from one snapshot. */
export class NameTable {
  readonly domain: string;
  /** Names wanted by more than one service, sorted by name. */
  readonly collisions: readonly NameCollision[];
  /** Service names that cannot be a DNS name (a label over 63 bytes, other characters). */
  readonly unservable: readonly string[];
  private readonly forward = new Map<string, { service: string; a?: string; aaaa?: string }>();
  /** Names that exist only as parents of served names (empty non-terminals). */
  private readonly parents = new Set<string>();
  private readonly ptr = new Map<string, string>();
  private readonly pools: VipPool[] = [];

  constructor(snapshot: VipSnapshot, options: NameTableOptions) {
    this.domain = normalizeDomain(options.domain);
    const wanted = new Map<string, NameEntry[]>();
    const unservable: string[] = [];
    const want = (name: string, entry: NameEntry): void => {
      const list = wanted.get(name);
      if (list === undefined) wanted.set(name, [entry]);
      else list.push(entry);
    };
    const services = snapshot.allServices();
    for (const service of services.keys()) {
      const exact = dnsName(`${service}.${this.domain}`);
      if (exact === undefined) unservable.push(service);
      else want(exact, { service, rewritten: false });
      const variant = kumaVariant(service);
      const rewritten = variant === undefined ? undefined : dnsName(`${variant}.${this.domain}`);
      if (rewritten !== undefined) want(rewritten, { service, rewritten: true });
    }
    const collisions: NameCollision[] = [];
    /** service -> the name it won, exact preferred (for PTR). */
    const ownName = new Map<string, string>();
    for (const [name, entries] of wanted) {
      const winner = entries.reduce((best, entry) => (better(entry, best) ? entry : best));
      const others = entries.filter((e) => e !== winner).map((e) => e.service);
      if (others.length > 0) {
        collisions.push({
          name,
          winner: winner.service,
          losers: [...new Set(others)].sort(byText),
        });
      }
      const lookup = services.get(winner.service);
      if (lookup === undefined) continue;
      const a = lookup.addresses.find((x) => ipaddr.parse(x.vip).kind() === "ipv4")?.vip;
      const aaaa = lookup.addresses.find((x) => ipaddr.parse(x.vip).kind() === "ipv6")?.vip;
      this.forward.set(name, {
        service: winner.service,
        ...(a !== undefined ? { a } : {}),
        ...(aaaa !== undefined ? { aaaa } : {}),
      });
      const previous = ownName.get(winner.service);
      if (previous === undefined || !winner.rewritten) ownName.set(winner.service, name);
      const labels = name.split(".");
      const domainLabels = this.domain.split(".").length;
      for (let i = 1; i < labels.length - domainLabels; i++) {
        this.parents.add(labels.slice(i).join("."));
      }
    }
    for (const [vip, owner] of snapshot.allVips()) {
      const name = ownName.get(owner.service);
      if (name !== undefined) this.ptr.set(reverseName(vip), name);
    }
    for (const lookup of snapshot.allHosts().values()) {
      const entry = `host/${lookup.host}`;
      const name = dnsName(lookup.host);
      if (name === undefined) {
        unservable.push(entry);
        continue;
      }
      const taken = this.forward.get(name);
      if (taken !== undefined) {
        collisions.push({ name, winner: taken.service, losers: [entry] });
        continue;
      }
      const v4 = ipaddr.parse(lookup.vip).kind() === "ipv4";
      this.forward.set(name, {
        service: entry,
        ...(v4 ? { a: lookup.vip } : { aaaa: lookup.vip }),
      });
      const reverse = reverseName(lookup.vip);
      if (!this.ptr.has(reverse)) this.ptr.set(reverse, name);
    }
    const ranges = new Set<string>(options.ranges ?? []);
    for (const mesh of snapshot.meshes()) ranges.add(snapshot.get(mesh)?.cidr ?? "");
    for (const range of ranges) {
      try {
        this.pools.push(VipPool.parse(range));
      } catch {
        // Not a range (an empty or malformed `cidr`): no reverse zone for it.
      }
    }
    this.collisions = collisions.sort((x, y) => byText(x.name, y.name));
    this.unservable = unservable.sort(byText);
  }

  /** How many forward names are served. */
  get size(): number {
    return this.forward.size;
  }

  /** What the responder answers for one question (`type` as dns-packet names it). */
  resolve(qname: string, type: string): Resolution {
    const name = qname.toLowerCase().replace(/\.$/, "");
    if (name.endsWith(".arpa")) return this.resolveReverse(name, type);
    const entry = this.forward.get(name);
    if (entry === undefined && name !== this.domain && !name.endsWith(`.${this.domain}`)) {
      return { status: "REFUSED", answers: [] };
    }
    if (entry === undefined) {
      const exists = name === this.domain || this.parents.has(name);
      return { status: exists ? "NOERROR" : "NXDOMAIN", answers: [] };
    }
    const answers: DnsAnswer[] = [];
    if ((type === "A" || type === "ANY") && entry.a !== undefined) {
      answers.push({ name, type: "A", data: entry.a });
    }
    if ((type === "AAAA" || type === "ANY") && entry.aaaa !== undefined) {
      answers.push({ name, type: "AAAA", data: entry.aaaa });
    }
    return { status: "NOERROR", answers };
  }

  private resolveReverse(name: string, type: string): Resolution {
    const target = this.ptr.get(name);
    if (target !== undefined) {
      return {
        status: "NOERROR",
        answers: type === "PTR" || type === "ANY" ? [{ name, type: "PTR", data: target }] : [],
      };
    }
    const address = addressOfReverseName(name);
    if (address !== undefined && this.pools.some((pool) => pool.contains(address))) {
      return { status: "NXDOMAIN", answers: [] };
    }
    return { status: "REFUSED", answers: [] };
  }
}
