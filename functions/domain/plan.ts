import type { VipPool } from "./pool.ts";
import { own, recordOf } from "./records.ts";
import { compareServices } from "./service-set.ts";
import type { VipContent, VipItem } from "./types.ts";

/** What a mesh needs, given the VIPs it holds and the services it should have. */
export interface MeshPlan {
  /** Services that stay, with the in-range VIP they already hold in this mesh. */
  readonly keep: ReadonlyMap<string, string>;
  /** Services that need a VIP from the global claims, in sorted order. */
  readonly needed: readonly string[];
  /**
   * Subset of `needed`: services whose VIP here must change (renumbered): it lies outside the
   * range, or it is not the VIP of the service's global claim (see {@link alignWithClaims}).
   */
  readonly outOfRange: ReadonlyMap<string, string>;
  /** Services that left this mesh, with the VIP they held here. */
  readonly removed: ReadonlyMap<string, string>;
}

/**
 * Splits a mesh's services into those that keep their VIP and those that need one.
 *
 * Invariant (stability): a service that stays in the mesh keeps the VIP the mesh item already
 * gives it, as long as that VIP lies in the current range; only new services and services with
 * an out-of-range VIP (after a `VIP_CIDR` change) go to `needed`. Like Kuma, existing
 * addresses are reserved before anything new is handed out.
 */
export function planMesh(
  current: VipItem | undefined,
  services: readonly string[],
  pool: VipPool,
): MeshPlan {
  const held = current?.vips;
  const wanted = new Set(services);
  const keep = new Map<string, string>();
  const outOfRange = new Map<string, string>();
  const needed: string[] = [];
  for (const service of [...wanted].sort(compareServices)) {
    const vip = own(held, service);
    const canonical = vip === undefined ? undefined : pool.canonical(vip);
    if (canonical !== undefined) {
      keep.set(service, canonical);
      continue;
    }
    if (vip !== undefined) outOfRange.set(service, vip);
    needed.push(service);
  }
  const removed = new Map<string, string>();
  for (const [service, vip] of Object.entries(held ?? {})) {
    if (!wanted.has(service)) removed.set(service, vip);
  }
  return { keep, needed, outOfRange, removed };
}

/**
 * Whether a pass checks the item's VIPs against their claims ({@link alignWithClaims}): claims
 * have moved (`renumberings`, the claims' count of moves) since the item was written.
 */
export function claimsMovedSince(item: VipItem, renumberings: number): boolean {
  return item.renumberings !== renumberings;
}

/**
 * Moves to `needed` every kept service whose VIP here is not its global claim's VIP.
 *
 * Invariant 4 (same service, same VIP): a claim moves only when a range change renumbers it,
 * so a mesh not reconciled under that range may still list the old VIP; even if that VIP is in
 * the range again (a wider range, or a rollback), the claim is the truth and every mesh follows
 * it.
 */
export function alignWithClaims(plan: MeshPlan, claimVips: ReadonlyMap<string, string>): MeshPlan {
  const keep = new Map(plan.keep);
  const outOfRange = new Map(plan.outOfRange);
  const needed = [...plan.needed];
  for (const [service, vip] of plan.keep) {
    const claimed = claimVips.get(service);
    if (claimed === undefined || claimed === vip) continue;
    keep.delete(service);
    outOfRange.set(service, vip);
    needed.push(service);
  }
  needed.sort(compareServices);
  return { keep, needed, outOfRange, removed: plan.removed };
}

function sortedRecord(entries: Iterable<[string, string]>): Record<string, string> {
  const list = [...entries].sort(([a], [b]) => compareServices(a, b));
  return recordOf(list);
}

/**
 * Builds the content of a VIP item from assignments, unallocated reasons and the services
 * still pending an address (a pass that ran out of time, decision 160).
 */
export function buildContent(
  assigned: Iterable<[string, string]>,
  unallocated: Iterable<[string, string]>,
  cidr: string,
  pending: Iterable<string> = [],
): VipContent {
  return {
    vips: sortedRecord(assigned),
    cidr,
    unallocated: sortedRecord(unallocated),
    pending: [...pending].sort(compareServices),
  };
}

function sameRecord(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>) {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => own(b, key) !== undefined && own(a, key) === own(b, key));
}

/** True when writing `next` over `current` would change nothing a reader sees. */
export function sameContent(current: VipItem | undefined, next: VipContent): boolean {
  if (current === undefined) return false;
  return (
    current.cidr === next.cidr &&
    sameRecord(current.vips, next.vips) &&
    sameRecord(current.unallocated ?? {}, next.unallocated) &&
    sameList(current.pending ?? [], next.pending)
  );
}

/** Whether two lists of distinct names hold the same names, in any order. */
function sameList(a: readonly string[], b: readonly string[]): boolean {
  const names = new Set(a);
  return a.length === b.length && b.every((name) => names.has(name));
}

/** The reason recorded in `unallocated` when the range has no free address. */
export function exhaustedReason(pool: VipPool): string {
  return `range ${pool.cidr} exhausted: all ${pool.size} addresses are claimed or quarantined`;
}
