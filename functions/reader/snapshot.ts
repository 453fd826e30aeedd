/**
 * The reader's view of the vips table: one {@link MeshView} per mesh, and the indexes that answer
 * "which VIP has this service" and "whose is this VIP". Pure: no I/O. Names are data: every
 * collection keyed by a service or mesh name is a Map.
 */
import ipaddr from "ipaddr.js";
import { hostEntry } from "../domain/hosts.ts";
import type { PlainRecord } from "../store/attribute-values.ts";
import { decodeVipItem } from "../store/vip-item-codec.ts";

/** One mesh's VIP item, decoded (either stored format) and checked. */
export interface MeshView {
  readonly mesh: string;
  /** 1 on creation, +1 on every write of the item. */
  readonly version: number;
  /** Random id of this life of the mesh's item ("" if the item has none). */
  readonly incarnation: string;
  /** The range the VIPs came from. */
  readonly cidr: string;
  /** ISO-8601 time of the item's last write. */
  readonly updatedAt: string;
  /** service -> VIP, in canonical text (`fd00::12`, `240.0.0.7`). */
  readonly vips: ReadonlyMap<string, string>;
  /** service -> reason, for services without a VIP (range exhausted). */
  readonly unallocated: ReadonlyMap<string, string>;
  /** External services' hosts -> VIP (canonical text); empty when the mesh has none. */
  readonly hosts: ReadonlyMap<string, string>;
  /** host -> reason, for hosts without a VIP (range exhausted). */
  readonly unallocatedHosts: ReadonlyMap<string, string>;
  /**
   * Services of the mesh without a VIP yet: a pass ran out of its invocation's time and a
   * continuation is claiming them (decision 160); usually empty, and emptied within seconds.
   */
  readonly pending: readonly string[];
  /** The hosts pending, likewise. */
  readonly pendingHosts: readonly string[];
}

/** Why an item (or part of it) was skipped. */
export interface MalformedItem {
  /** The mesh, when the item has a usable key. */
  readonly mesh: string | undefined;
  readonly version: number | undefined;
  /** The service (or `host/<host>`) whose entry was skipped; undefined when the whole item was. */
  readonly service?: string;
  readonly reason: string;
}

/** A plain IPv4 (dotted decimal, no leading zeros) or IPv6 address, in canonical text. */
export function canonicalVip(text: string): string | undefined {
  const ipv4 = /^(0|[1-9]\d{0,2})(\.(0|[1-9]\d{0,2})){3}$/;
  if (ipv4.test(text)) return ipaddr.IPv4.isValid(text) ? ipaddr.parse(text).toString() : undefined;
  if (!/^[0-9A-Fa-f:.]+$/.test(text) || !text.includes(":")) return undefined;
  if (!ipaddr.IPv6.isValid(text)) return undefined;
  return ipaddr.parse(text).toString();
}

/**
 * Decodes a stored VIP item (plain attribute values, as the project's item client returns
 * them; `vipsGz` as bytes) into a view. The whole item is rejected (`view` undefined) when it
 * has no mesh name, no valid version, or a format-2 payload that does not decode; a VIP that is
 * not an address only drops its entry. Every skip is one issue.
 */
export function meshViewOf(raw: PlainRecord): { view?: MeshView; issues: MalformedItem[] } {
  const mesh = typeof raw.mesh === "string" && raw.mesh !== "" ? raw.mesh : undefined;
  const version =
    typeof raw.version === "number" && Number.isSafeInteger(raw.version) && raw.version > 0
      ? raw.version
      : undefined;
  if (mesh === undefined) {
    return { issues: [{ mesh: undefined, version, reason: "no mesh name (key `mesh`)" }] };
  }
  if (version === undefined) {
    return {
      issues: [{ mesh, version, reason: `version ${JSON.stringify(raw.version)} is not valid` }],
    };
  }
  let decoded: ReturnType<typeof decodeVipItem>;
  try {
    decoded = decodeVipItem(raw);
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    return { issues: [{ mesh, version, reason: `cannot decode the item: ${detail}` }] };
  }
  const issues: MalformedItem[] = [];
  const addresses = (
    entries: Readonly<Record<string, string>>,
    entryOf: (name: string) => string,
  ) => {
    const out = new Map<string, string>();
    for (const name of Object.keys(entries)) {
      const text = entries[name] as string;
      const vip = canonicalVip(text);
      if (vip === undefined) {
        issues.push({
          mesh,
          version,
          service: entryOf(name),
          reason: `VIP ${JSON.stringify(text)} is not an address`,
        });
      } else {
        out.set(name, vip);
      }
    }
    return out;
  };
  const vips = addresses(decoded.vips, (name) => name);
  const hosts = addresses(decoded.hosts ?? {}, hostEntry);
  const unallocated = new Map(Object.entries(decoded.unallocated ?? {}));
  const unallocatedHosts = new Map(Object.entries(decoded.unallocatedHosts ?? {}));
  return {
    view: {
      mesh,
      version,
      incarnation: decoded.incarnation,
      cidr: decoded.cidr,
      updatedAt: decoded.updatedAt,
      vips,
      unallocated,
      hosts,
      unallocatedHosts,
      pending: decoded.pending ?? [],
      pendingHosts: decoded.pendingHosts ?? [],
    },
    issues,
  };
}

/** A service's VIP and the meshes that list it. */
export interface ServiceLookup {
  readonly service: string;
  /** The VIP most meshes list (ties: the smaller text); what the DNS responder answers. */
  readonly vip: string;
  /** Meshes that list the service with {@link vip}, sorted. */
  readonly meshes: readonly string[];
  /**
   * Every VIP the service has, `vip` first. More than one only in passing (a `VIP_CIDR` change
   * that has not reached every mesh's item yet).
   */
  readonly addresses: ReadonlyArray<{ readonly vip: string; readonly meshes: readonly string[] }>;
}

/** A host's VIP and the meshes that list it (an external service's host). */
export interface HostLookup {
  readonly host: string;
  /** The VIP most meshes list (ties: the smaller text). */
  readonly vip: string;
  /** Meshes that list the host with {@link vip}, sorted. */
  readonly meshes: readonly string[];
}

/** Whose a VIP is. */
export interface ReverseLookup {
  readonly vip: string;
  /** The service (if several list it, which the contract rules out, the smallest name). */
  readonly service: string;
  /** Meshes that list `service` with this VIP, sorted. */
  readonly meshes: readonly string[];
  /** Every service listed with this VIP, sorted; more than one is a contract violation. */
  readonly services: readonly string[];
}

const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** An immutable set of mesh views with lazily built lookups. */
export class VipSnapshot {
  private services: Map<string, ServiceLookup> | undefined;
  private owners: Map<string, ReverseLookup> | undefined;
  private hostIndex: Map<string, HostLookup> | undefined;
  private hostOwners: Map<string, HostLookup> | undefined;

  constructor(readonly meshViews: ReadonlyMap<string, MeshView> = new Map()) {}

  /** Mesh names, sorted. */
  meshes(): string[] {
    return [...this.meshViews.keys()].sort(byText);
  }

  get(mesh: string): MeshView | undefined {
    return this.meshViews.get(mesh);
  }

  lookup(service: string): ServiceLookup | undefined {
    this.services ??= this.indexServices();
    return this.services.get(service);
  }

  /** All services with a VIP, with their lookups. */
  allServices(): ReadonlyMap<string, ServiceLookup> {
    this.services ??= this.indexServices();
    return this.services;
  }

  /** Whose `vip` is; any textual form of the address (`fd00:0::12`) is accepted. */
  reverse(vip: string): ReverseLookup | undefined {
    const canonical = canonicalVip(vip);
    if (canonical === undefined) return undefined;
    this.owners ??= this.indexOwners();
    return this.owners.get(canonical);
  }

  /** Every VIP with its owner. */
  allVips(): ReadonlyMap<string, ReverseLookup> {
    this.owners ??= this.indexOwners();
    return this.owners;
  }

  /** An external service's host (lower case, as the items list it) and its VIP. */
  lookupHost(host: string): HostLookup | undefined {
    return this.allHosts().get(host.toLowerCase());
  }

  /** Every host with a VIP. */
  allHosts(): ReadonlyMap<string, HostLookup> {
    this.hostIndex ??= this.indexHosts();
    return this.hostIndex;
  }

  /** Which host `vip` is (any textual form), when it is a host's VIP. */
  reverseHost(vip: string): HostLookup | undefined {
    const canonical = canonicalVip(vip);
    if (canonical === undefined) return undefined;
    if (this.hostOwners === undefined) {
      this.hostOwners = new Map();
      // Hosts by name order: a VIP listed for two hosts (never, by the contract) names the first.
      for (const lookup of [...this.allHosts().values()].sort((a, b) => byText(a.host, b.host))) {
        if (!this.hostOwners.has(lookup.vip)) this.hostOwners.set(lookup.vip, lookup);
      }
    }
    return this.hostOwners.get(canonical);
  }

  private indexHosts(): Map<string, HostLookup> {
    const holders = new Map<string, Map<string, string[]>>();
    for (const mesh of this.meshes()) {
      for (const [host, vip] of (this.meshViews.get(mesh) as MeshView).hosts) {
        const byVip = holders.get(host) ?? new Map<string, string[]>();
        holders.set(host, byVip);
        byVip.set(vip, [...(byVip.get(vip) ?? []), mesh]);
      }
    }
    const out = new Map<string, HostLookup>();
    for (const [host, byVip] of holders) {
      const [vip, meshes] = [...byVip].sort(
        (a, b) => b[1].length - a[1].length || byText(a[0], b[0]),
      )[0] as [string, string[]];
      out.set(host, { host, vip, meshes });
    }
    return out;
  }

  private indexServices(): Map<string, ServiceLookup> {
    const holders = new Map<string, Map<string, string[]>>();
    for (const mesh of this.meshes()) {
      for (const [service, vip] of (this.meshViews.get(mesh) as MeshView).vips) {
        let byVip = holders.get(service);
        if (byVip === undefined) {
          byVip = new Map();
          holders.set(service, byVip);
        }
        const meshes = byVip.get(vip);
        if (meshes === undefined) byVip.set(vip, [mesh]);
        else meshes.push(mesh);
      }
    }
    const out = new Map<string, ServiceLookup>();
    for (const [service, byVip] of holders) {
      const addresses = [...byVip]
        .map(([vip, meshes]) => ({ vip, meshes }))
        .sort((a, b) => b.meshes.length - a.meshes.length || byText(a.vip, b.vip));
      const first = addresses[0] as { vip: string; meshes: string[] };
      out.set(service, { service, vip: first.vip, meshes: first.meshes, addresses });
    }
    return out;
  }

  private indexOwners(): Map<string, ReverseLookup> {
    const holders = new Map<string, Map<string, string[]>>();
    for (const mesh of this.meshes()) {
      for (const [service, vip] of (this.meshViews.get(mesh) as MeshView).vips) {
        let byService = holders.get(vip);
        if (byService === undefined) {
          byService = new Map();
          holders.set(vip, byService);
        }
        const meshes = byService.get(service);
        if (meshes === undefined) byService.set(service, [mesh]);
        else meshes.push(mesh);
      }
    }
    const out = new Map<string, ReverseLookup>();
    for (const [vip, byService] of holders) {
      const services = [...byService.keys()].sort(byText);
      const service = services[0] as string;
      out.set(vip, { vip, service, meshes: byService.get(service) as string[], services });
    }
    return out;
  }
}
