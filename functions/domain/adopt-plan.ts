import { type AdoptEntry, compareAddresses } from "./adopt-entries.ts";
import { hostEntry, isHostName } from "./hosts.ts";
import type { VipPool } from "./pool.ts";
import { compareServices } from "./service-set.ts";

/**
 * The adoption plan: every conflict decided before anything is written, one decision per entry
 * of the files. Pure: the allocator's state (the claims of the services and addresses the files
 * name) is read by the caller and passed in.
 *
 * The rule, in order:
 * 1. a service that already has a claim in this allocator keeps its VIP (the allocator's state
 *    wins: it may already be served); entries with another VIP renumber to it;
 * 2. an address claimed by another service in this allocator is not adopted for this one;
 * 3. an address outside VIP_CIDR is refused (the whole adoption), unless `renumberOutside`;
 * 4. the remaining (service, VIP) pairs are taken in order: the VIP in the most meshes of the
 *    service first, then the lowest address, then the service name; a pair is adopted when
 *    neither its service nor its VIP is taken yet. So a service with different VIPs in
 *    different meshes keeps the VIP most of its meshes use (the others renumber), and a VIP two
 *    services use goes to the one that has it in more meshes (then the first by name);
 * 5. a service left with no VIP gets a fresh one from the range on its mesh's pass.
 */
export type ConflictKind =
  /** The same service has different VIPs in different meshes (or twice in one mesh). */
  | "different-vips"
  /** One VIP for two services. */
  | "shared-vip"
  /** The VIP is outside VIP_CIDR. */
  | "outside-range"
  /** The VIP is claimed by another service in this allocator. */
  | "address-claimed"
  /** The service already has another VIP in this allocator. */
  | "service-claimed";

export type Outcome =
  /** A claim is written for this service at this VIP. */
  | "adopt"
  /** The allocator already holds exactly this (nothing to write). */
  | "in-place"
  /** The service gets another VIP in this mesh (`vip`: which; undefined: a fresh one). */
  | "renumber"
  /** Outside VIP_CIDR without `renumberOutside`: the adoption is refused. */
  | "refuse"
  /** Not adopted by design: FQDNs (not supported) and Kubernetes hosts (not VIPs of the range). */
  | "skip";

export interface EntryDecision {
  readonly entry: AdoptEntry;
  readonly outcome: Outcome;
  /** The VIP the name will have (undefined: a fresh one from the range, or none). */
  readonly vip: string | undefined;
  readonly conflict?: ConflictKind;
  /** The other party of the conflict (a service, or the VIP chosen instead). */
  readonly with?: string;
  /** One sentence: what happens and why. */
  readonly reason: string;
}

/** The allocator's state as far as the plan needs it. */
export interface AdoptState {
  /** Service -> the VIP of its claim. */
  readonly services: ReadonlyMap<string, string>;
  /** Address -> the service that owns its claim. */
  readonly addresses: ReadonlyMap<string, string>;
}

export interface AdoptPlan {
  readonly decisions: readonly EntryDecision[];
  /** Claims to write: service -> VIP, sorted by service. */
  readonly claims: ReadonlyMap<string, string>;
  /** Every mesh the files name, sorted. */
  readonly meshes: readonly string[];
  /** True when an entry is refused: nothing may be written. */
  readonly refused: boolean;
}

interface Pair {
  readonly service: string;
  readonly vip: string;
  readonly meshes: Set<string>;
}

/** Whether a host entry names a Kubernetes Service or pod address (not a VIP of the range). */
const isKubernetesHost = (entry: AdoptEntry): boolean =>
  entry.origin === "k8s" || entry.origin === "kubernetes";

/**
 * The name an entry is adopted under: a service's own name; an external service's host as the
 * allocator keeps hosts, `host/<host>` (domain/hosts.ts: the same claims as services, so the
 * host keeps its VIP once an external service of the mesh names it); undefined for what is not
 * adopted (FQDNs, Kubernetes hosts, a host that is not a DNS name).
 */
export function adoptedName(entry: AdoptEntry): string | undefined {
  if (entry.kind === "service") return entry.name;
  if (entry.kind !== "host" || isKubernetesHost(entry)) return undefined;
  const host = entry.name.toLowerCase().replace(/\.$/, "");
  return isHostName(host) ? hostEntry(host) : undefined;
}

export function planAdoption(
  entries: readonly AdoptEntry[],
  state: AdoptState,
  options: { readonly pool: VipPool; readonly renumberOutside: boolean },
): AdoptPlan {
  const { pool } = options;
  // Candidate pairs: in range, name without a claim, address not claimed by another.
  const pairs = new Map<string, Pair>();
  const meshCount = new Map<string, Map<string, number>>();
  for (const entry of entries) {
    const name = adoptedName(entry);
    if (name === undefined) continue;
    const inRange = pool.canonical(entry.vip);
    const perVip = meshCount.get(name) ?? new Map<string, number>();
    meshCount.set(name, perVip);
    if (inRange === undefined || state.services.has(name)) continue;
    const owner = state.addresses.get(inRange);
    if (owner !== undefined) continue;
    const id = JSON.stringify([name, inRange]);
    const pair = pairs.get(id) ?? { service: name, vip: inRange, meshes: new Set() };
    pair.meshes.add(entry.mesh);
    pairs.set(id, pair);
    perVip.set(inRange, pair.meshes.size);
  }
  const ordered = [...pairs.values()].sort(
    (a, b) =>
      b.meshes.size - a.meshes.size ||
      compareAddresses(a.vip, b.vip) ||
      compareServices(a.service, b.service),
  );
  const chosen = new Map<string, string>(state.services);
  const taken = new Map<string, string>(state.addresses);
  const claims = new Map<string, string>();
  for (const pair of ordered) {
    if (chosen.has(pair.service) || taken.has(pair.vip)) continue;
    chosen.set(pair.service, pair.vip);
    taken.set(pair.vip, pair.service);
    claims.set(pair.service, pair.vip);
  }
  const decisions = entries.map((entry) =>
    decide(entry, { ...options, state, chosen, taken, meshCount }),
  );
  return {
    decisions,
    claims: new Map([...claims].sort(([a], [b]) => compareServices(a, b))),
    meshes: [...new Set(entries.map((entry) => entry.mesh))].sort(compareServices),
    refused: decisions.some((decision) => decision.outcome === "refuse"),
  };
}

interface Context {
  readonly state: AdoptState;
  readonly chosen: ReadonlyMap<string, string>;
  readonly taken: ReadonlyMap<string, string>;
  readonly pool: VipPool;
  readonly renumberOutside: boolean;
  readonly meshCount: ReadonlyMap<string, ReadonlyMap<string, number>>;
}

function decide(entry: AdoptEntry, ctx: Context): EntryDecision {
  const adopted = adoptedName(entry);
  if (entry.kind === "host" && adopted === undefined) {
    const why = isKubernetesHost(entry)
      ? "a Kubernetes Service or pod address (not a VIP of the range)"
      : "not a DNS name the allocator gives a VIP";
    return { entry, outcome: "skip", vip: undefined, reason: `host entry not adopted: ${why}` };
  }
  if (entry.kind === "fqdn") {
    return {
      entry,
      outcome: "skip",
      vip: undefined,
      reason: "FQDN entry (a VirtualOutbound or MeshGateway hostname) not supported",
    };
  }
  // A host is claimed as `host/<host>`, and named `host <host>` in the reasons.
  const service = adopted as string;
  const shown = entry.kind === "host" ? `host ${entry.name}` : service;
  const final = ctx.chosen.get(service);
  const where = `mesh ${entry.mesh}`;
  const to = final === undefined ? "a fresh VIP from the range" : final;
  const held = ctx.state.services.get(service);
  if (held !== undefined) {
    if (held === entry.vip) {
      return { entry, outcome: "in-place", vip: held, reason: "already claimed at this VIP" };
    }
    return {
      entry,
      outcome: "renumber",
      vip: held,
      conflict: "service-claimed",
      with: held,
      reason: `${where} renumbers ${shown} from ${entry.vip} to ${held}: the allocator already gives it ${held}`,
    };
  }
  const inRange = ctx.pool.canonical(entry.vip);
  if (inRange === undefined) {
    if (!ctx.renumberOutside) {
      return {
        entry,
        outcome: "refuse",
        vip: undefined,
        conflict: "outside-range",
        reason: `${entry.vip} is outside VIP_CIDR ${ctx.pool.cidr}: refused (--renumber-outside gives ${shown} ${to} instead)`,
      };
    }
    return {
      entry,
      outcome: "renumber",
      vip: final,
      conflict: "outside-range",
      reason: `${where} renumbers ${shown} from ${entry.vip} (outside VIP_CIDR ${ctx.pool.cidr}) to ${to}`,
    };
  }
  if (final === inRange) {
    return { entry, outcome: "adopt", vip: final, reason: "adopted" };
  }
  const owner = ctx.state.addresses.get(inRange);
  if (owner !== undefined) {
    return {
      entry,
      outcome: "renumber",
      vip: final,
      conflict: "address-claimed",
      with: owner,
      reason: `${where} renumbers ${shown} from ${entry.vip} to ${to}: the allocator already gives ${entry.vip} to ${owner}`,
    };
  }
  const winner = ctx.taken.get(inRange);
  if (winner !== undefined && winner !== service) {
    const mine = ctx.meshCount.get(service)?.get(inRange) ?? 0;
    const theirs = ctx.meshCount.get(winner)?.get(inRange) ?? 0;
    const why =
      theirs > mine
        ? `${winner} has it in more meshes (${theirs} to ${mine})`
        : `${winner} has it in as many meshes and sorts first`;
    return {
      entry,
      outcome: "renumber",
      vip: final,
      conflict: "shared-vip",
      with: winner,
      reason: `${where} renumbers ${shown} from ${entry.vip} to ${to}: ${entry.vip} is also ${winner}'s and ${why}`,
    };
  }
  const count = (vip: string | undefined) =>
    vip === undefined ? 0 : (ctx.meshCount.get(service)?.get(vip) ?? 0);
  return {
    entry,
    outcome: "renumber",
    vip: final,
    conflict: "different-vips",
    ...(final !== undefined ? { with: final } : {}),
    reason: `${where} renumbers ${shown} from ${entry.vip} to ${to}: ${
      count(final) > count(inRange)
        ? `the VIP of ${shown} in more meshes (${count(final)} to ${count(inRange)})`
        : "the lowest of its VIPs in as many meshes"
    }`,
  };
}

/**
 * True when the allocator's state already is what the files say for every entry it can adopt:
 * nothing to write and no conflict (FQDNs and Kubernetes hosts, never adopted, do not count). What
 * `vips adopt --dry-run` exits 0 on.
 */
export function alreadyAdopted(plan: AdoptPlan): boolean {
  return (
    plan.claims.size === 0 &&
    plan.decisions.every((d) => d.outcome === "in-place" || d.outcome === "skip")
  );
}
