import type { ClaimStore, LeaveRequest, MembershipRequest } from "../store/ports.ts";

/**
 * Makes `mesh` a user of the service's claim at `vip`. A lost condition is still a success when
 * the claim already carries this membership at a version at least as new (another writer of the
 * same mesh asserted it); otherwise the caller re-reads and tries again.
 */
export async function joinMesh(claims: ClaimStore, request: MembershipRequest): Promise<boolean> {
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
  claims: ClaimStore,
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
