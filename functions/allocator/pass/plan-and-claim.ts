import {
  alignWithClaims,
  claimsMovedSince,
  exhaustedReason,
  type MeshPlan,
  planMesh,
} from "../../domain/plan.ts";
import { reclaimCutoffMs } from "../../domain/pool.ts";
import { emptyRecord, own } from "../../domain/records.ts";
import type { Membership, VipItem } from "../../domain/types.ts";
import { METRIC } from "../telemetry-names.ts";
import type { AddressFinder } from "./address-finder.ts";
import type { ReconcileDeps } from "./deps.ts";
import { attemptFinder } from "./invocation.ts";
import type { Asserted } from "./memberships.ts";
import { claimServices } from "./obtain-vip.ts";
import { listedServices } from "./service-set-view.ts";

/** What the plan-and-claim step leaves for the commit: the content to write and why. */
export interface Claimed {
  readonly plan: MeshPlan;
  /** The claims' renumbering count, read before the claims. */
  readonly renumberings: number;
  /** Services an earlier write dropped whose membership of this mesh is still recorded. */
  readonly stillMembers: readonly string[];
  /** The membership the item to write asserts (its incarnation and version). */
  readonly membership: Membership;
  /** Service -> VIP, for every service the item will list with an address. */
  readonly assigned: ReadonlyMap<string, string>;
  /** Service -> why it has no address. */
  readonly unallocated: ReadonlyMap<string, string>;
  /**
   * Services whose claim the budget left to a continuation and that have no VIP to keep
   * meanwhile (decision 160); those renumbered keep their old VIP in `assigned` instead.
   */
  readonly pending: readonly string[];
  /** The claims stopped early: the mesh has work left for a continuation. */
  readonly deferred: boolean;
  /** Services that got an address in this step (service -> VIP). */
  readonly added: Record<string, string>;
  /** Of `added`, those that had one outside the range (service -> old VIP). */
  readonly renumbered: Record<string, string>;
  /** The attempt's address finder (told of releases, asked whether any address is free). */
  readonly finder: AddressFinder;
}

/**
 * Step 2 of a pass: plans the mesh's content from the service set and the item, reads the
 * claims of the services it needs, and joins or claims an address for each (asserting the
 * mesh's membership before any item lists it; `asserted` keeps what this step asserted).
 */
export async function planAndClaim(
  mesh: string,
  current: VipItem | undefined,
  services: readonly string[],
  deps: ReconcileDeps,
  asserted: Asserted,
): Promise<Claimed> {
  const { pool, telemetry } = deps;
  // Read before the claims: a claim that moves after this read bumps the count again.
  const renumberings = await deps.claims.getRenumberings();
  const verify = current !== undefined && claimsMovedSince(current, renumberings);
  const wanted = new Set(services);
  // Leaves an earlier write recorded: of services no longer wanted, and of services it listed
  // without an address (renumbered into a full range, so their old address's claim goes).
  const priorLeaving = (current?.leaving ?? []).filter(
    (service) => !wanted.has(service) || own(current?.vips, service) === undefined,
  );
  const unlisted = strayCandidates(current, wanted, priorLeaving, deps);
  let plan = planMesh(current, services, pool);
  const claimed = await deps.claims.getServices([
    ...new Set([...plan.needed, ...(verify ? plan.keep.keys() : []), ...priorLeaving, ...unlisted]),
  ]);
  // Memberships a failed pass of this item's life asserted for services no item lists (its
  // item write failed, and settling failed too, or it was killed): retracted with this pass's
  // own, past a fence when newer than the item (decision 114).
  for (const service of unlisted) {
    const held = claimed.get(service)?.meshes.get(mesh);
    if (held !== undefined && held.incarnation === current?.incarnation)
      asserted.set(service, held);
  }
  if (verify) {
    plan = alignWithClaims(
      plan,
      new Map([...claimed].map(([service, claim]) => [service, claim.vip])),
    );
  }
  // Leaves an earlier write did not finish: the service is still a member for this item's
  // life, or its last membership was removed but its release never came (a release that failed
  // after the leave: no later leave would find it, and it would wait for the sweep).
  const stillMembers = priorLeaving.filter((service) => {
    const claim = claimed.get(service);
    if (current === undefined || claim === undefined) return false;
    if (claim.meshes.get(mesh)?.incarnation === current.incarnation) return true;
    return claim.meshes.size === 0 && claim.releasedAt === undefined;
  });
  const incarnation = current?.incarnation ?? deps.newId();
  const version = (current?.version ?? 0) + 1;
  const membership: Membership = { incarnation, version };
  const assigned = new Map(plan.keep);
  const unallocated = new Map<string, string>();
  const added = emptyRecord<string>();
  const renumbered = emptyRecord<string>();
  const nowMs = deps.now();
  const { finder, finish } = attemptFinder(deps);
  const cutoffMs = reclaimCutoffMs(nowMs, deps.quarantineSeconds);

  // New addresses this pass will look for: services with no claim in the range.
  finder.expect(
    plan.needed.filter((service) => {
      const claim = claimed.get(service);
      return claim === undefined || pool.canonical(claim.vip) === undefined;
    }).length,
  );
  const { obtained, untried } = await claimServices(
    plan.needed,
    {
      mesh,
      deps,
      finder,
      membership,
      nowMs,
      cutoffMs,
      prefetched: claimed,
    },
    asserted,
  );
  for (const service of plan.needed) {
    if (!obtained.has(service)) continue;
    const vip = obtained.get(service);
    if (vip === undefined) {
      unallocated.set(service, exhaustedReason(pool));
      continue;
    }
    assigned.set(service, vip);
    added[service] = vip;
    const old = plan.outOfRange.get(service);
    if (old !== undefined) {
      renumbered[service] = old;
      telemetry.warn("service renumbered: its VIP lies outside VIP_CIDR", {
        mesh,
        kumaService: service,
        from: old,
        to: vip,
        cidr: pool.cidr,
      });
      telemetry.metric(METRIC.renumbered, "Count", 1);
    }
  }
  // Out of time (decision 160): a service still at a VIP outside the range keeps it until the
  // continuation renumbers it (its claim still holds that address); any other waits, pending.
  const pending: string[] = [];
  for (const service of untried) {
    const old = plan.outOfRange.get(service);
    if (old !== undefined && pool.canonical(old) === undefined) assigned.set(service, old);
    else pending.push(service);
  }
  await finish();
  if (unallocated.size > 0) {
    telemetry.metric(METRIC.exhausted, "Count", unallocated.size);
    telemetry.error("range exhausted: services left without a VIP", {
      mesh,
      cidr: pool.cidr,
      size: pool.size.toString(),
      unallocated: [...unallocated.keys()].slice(0, 50),
      unallocatedCount: unallocated.size,
    });
  }
  return {
    plan,
    renumberings,
    stillMembers,
    membership,
    assigned,
    unallocated,
    pending,
    deferred: untried.length > 0,
    added,
    renumbered,
    finder,
  };
}

/**
 * Services the batch named in the mesh that are neither in its set nor listed by the item nor
 * being left: a failed pass may have asserted their membership before its item write failed.
 */
function strayCandidates(
  current: VipItem | undefined,
  wanted: ReadonlySet<string>,
  priorLeaving: readonly string[],
  deps: ReconcileDeps,
): string[] {
  const named = deps.view?.touched;
  if (current === undefined || named === undefined) return [];
  const listed = new Set([...listedServices(current), ...priorLeaving]);
  return [...named].filter((service) => !wanted.has(service) && !listed.has(service));
}
