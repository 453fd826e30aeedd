import { VersionConflictError } from "../../domain/errors.ts";
import { own } from "../../domain/records.ts";
import type { Membership, VipItem } from "../../domain/types.ts";
import type { ClaimsPort, LeaveRequest, MembershipRequest } from "../../store/ports.ts";
import { backoffMs, fenceItem, type ReconcileDeps } from "./deps.ts";

/**
 * A mesh's memberships of the global service claims: joined before an item lists a service,
 * left only after an item without it is written (conditional on its incarnation and version),
 * so a claim can leak (safe: the sweep finds it) but a listed VIP is never released.
 */

/** Claims a pass asserted for the mesh, to retract those the final content leaves out. */
export type Asserted = Map<string, Membership>;

/**
 * Makes `mesh` a user of the service's claim at `vip`. A lost condition is still a success when
 * the claim already carries this membership at a version at least as new (another writer of the
 * same mesh asserted it); otherwise the caller re-reads and tries again.
 */
export async function joinMesh(claims: ClaimsPort, request: MembershipRequest): Promise<boolean> {
  const result = await claims.putMembership(request);
  if (result.written) return true;
  const claim = result.claim;
  const held = claim?.meshes.get(request.mesh);
  return (
    claim !== undefined &&
    claim.vip === request.vip &&
    claim.releasedAt === undefined &&
    held !== undefined &&
    held.incarnation === request.membership.incarnation &&
    held.version >= request.membership.version
  );
}

export type LeaveOutcome = "released" | "left" | "kept";

/**
 * Removes `mesh`'s membership (only the one `incarnation` asserted, up to `upToVersion`), and
 * releases the service when no mesh uses it any more. The release is decided on what the store
 * found, not on whether this request removed the membership: after a lost response whose retry
 * fails the condition, the membership is gone and the claim must still be released (no leak).
 */
export async function leaveMesh(
  claims: ClaimsPort,
  request: LeaveRequest & { readonly nowMs: number },
): Promise<LeaveOutcome> {
  const { nowMs, ...leave } = request;
  const result = await claims.removeMembership(leave);
  const claim = result.claim;
  const moved: LeaveOutcome = result.written ? "left" : "kept";
  if (claim === undefined || claim.meshes.size > 0 || claim.releasedAt !== undefined) return moved;
  const released = await claims.release({
    service: request.service,
    vip: claim.vip,
    nowMs,
    ...(claim.former !== undefined ? { former: claim.former } : {}),
  });
  return released ? "released" : moved;
}

/** Leaves `mesh` for each service, up to `item`'s version; returns how many were released. */
export async function leaveAll(
  services: readonly string[],
  mesh: string,
  item: VipItem,
  deps: Pick<ReconcileDeps, "claims" | "now">,
): Promise<number> {
  let released = 0;
  for (const service of services) {
    const result = await leaveMesh(deps.claims, {
      service,
      mesh,
      incarnation: item.incarnation,
      upToVersion: item.version,
      nowMs: deps.now(),
    });
    if (result === "released") released++;
  }
  return released;
}

/** Leaves every service a deleted item listed or was leaving; returns how many were released. */
export async function leaveDeletedItem(
  mesh: string,
  item: VipItem,
  deps: Pick<ReconcileDeps, "claims" | "now">,
): Promise<number> {
  const services = [...new Set([...Object.keys(item.vips), ...(item.leaving ?? [])])];
  return await leaveAll(services, mesh, item, deps);
}

/**
 * Retracts memberships this pass asserted that the committed item does not list. A membership
 * of the committed incarnation is removed only up to the committed version (a later writer may
 * have asserted it again); one of any other incarnation is dead (deleted, or our own create
 * that lost) and no one can commit it any more, so it is removed whatever its version.
 */
export async function retract(
  mesh: string,
  deps: Pick<ReconcileDeps, "claims" | "now">,
  asserted: Asserted,
  committed: VipItem | undefined,
): Promise<void> {
  for (const [service, membership] of asserted) {
    const listed = own(committed?.vips, service);
    if (committed !== undefined && listed !== undefined) {
      // Our speculative create may have overwritten the membership of the incarnation that
      // won; assert it again for the committed incarnation so a later leave can match it.
      if (membership.incarnation !== committed.incarnation) {
        const again = { incarnation: committed.incarnation, version: committed.version };
        await joinMesh(deps.claims, {
          service,
          vip: listed,
          mesh,
          membership: again,
          resume: false,
        });
      }
      continue;
    }
    const live = committed !== undefined && committed.incarnation === membership.incarnation;
    const upTo = live ? committed.version : Number.MAX_SAFE_INTEGER;
    await leaveMesh(deps.claims, {
      service,
      mesh,
      incarnation: membership.incarnation,
      upToVersion: upTo,
      nowMs: deps.now(),
    });
  }
  asserted.clear();
}

/**
 * {@link retract} against `current` when no asserted membership of its incarnation is newer
 * than it; otherwise against the item moved past them first ({@link fencedItem}: memberships a
 * failed pass left, found by a later one, decision 114). Returns the item as it is left.
 */
export async function retractPast(
  mesh: string,
  deps: ReconcileDeps,
  asserted: Asserted,
  current: VipItem,
): Promise<VipItem> {
  const newer = [...asserted.values()].some(
    (held) => held.incarnation === current.incarnation && held.version > current.version,
  );
  const committed = newer ? await fencedItem(mesh, deps, asserted) : current;
  await retract(mesh, deps, asserted, committed ?? current);
  return committed ?? current;
}

/** What a failed pass must still finish: the leaves of an item it deleted. */
export interface FailureState {
  deleted: VipItem | undefined;
}

/**
 * A pass that fails (throttled after the SDK's retries, out of attempts) leaves no membership
 * behind that no later pass would remove (invariant 11 on the event path; only a killed
 * invocation leaves that to the sweep, decision 045): it finishes the leaves of an item it
 * deleted, and retracts what it asserted against the item as it is now. A few tries, each
 * after a jittered pause; what still fails is left to the sweep.
 */
export async function settleAfterFailure(
  mesh: string,
  deps: ReconcileDeps,
  asserted: Asserted,
  failure: FailureState,
): Promise<void> {
  for (let tries = 1; tries <= 3; tries++) {
    try {
      if (failure.deleted !== undefined) {
        await leaveDeletedItem(mesh, failure.deleted, deps);
        failure.deleted = undefined;
      }
      if (asserted.size > 0) {
        const committed = await fencedItem(mesh, deps, asserted);
        // No item yet: this pass was a create, and a concurrent create of the same mesh (another
        // incarnation) may be about to write an item that lists these services, its membership
        // overwritten by ours. Leaving now could release a service that item lists; a claim kept
        // longer is safe, so they are left to the next pass of the mesh or the sweep.
        if (committed === undefined) return;
        await retract(mesh, deps, asserted, committed);
      }
      return;
    } catch (error) {
      if (tries === 3) {
        deps.telemetry.warn("a failed pass could not settle its memberships; the sweep will", {
          mesh,
          services: [...asserted.keys()].slice(0, 50),
          deleted: failure.deleted !== undefined,
          error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
        });
        return;
      }
      await deps.sleep(backoffMs(tries, deps.random));
    }
  }
}

/**
 * The mesh's item, moved past every version this pass asserted a membership for when its own
 * write never landed (the fence of decision 041): a membership asserted for version v of the
 * item's incarnation may be removed only once the item is at v or later, or a concurrent pass
 * writing v with the service listed would lose its membership. The fence rewrites the item's
 * content unchanged at that version; a concurrent pass that was about to write it loses its
 * condition, re-reads and asserts again what it lists.
 */
async function fencedItem(
  mesh: string,
  deps: ReconcileDeps,
  asserted: Asserted,
): Promise<VipItem | undefined> {
  for (let attempt = 1; ; attempt++) {
    const current = await deps.vipItems.get(mesh);
    if (current === undefined) return undefined;
    let past = current.version;
    for (const [service, membership] of asserted) {
      if (own(current.vips, service) !== undefined) continue;
      if (membership.incarnation === current.incarnation) past = Math.max(past, membership.version);
    }
    if (past === current.version) return current;
    const fenced = await fenceItem(deps.vipItems, current, past, deps.now());
    if (fenced !== undefined) return fenced;
    if (attempt >= deps.maxAttempts) {
      throw new VersionConflictError(`VIP item of mesh ${mesh}`, current.version);
    }
  }
}
