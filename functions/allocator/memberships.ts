import { own } from "../domain/records.ts";
import type { Membership, VipItem } from "../domain/types.ts";
import { joinMesh, leaveMesh } from "./claim-decisions.ts";
import type { ReconcileDeps } from "./reconcile-mesh.ts";

/** Claims a pass asserted for the mesh, to retract those the final content leaves out. */
export type Asserted = Map<string, Membership>;

/** Leaves `mesh` for each service, up to `item`'s version; returns how many were released. */
export async function leaveAll(
  services: readonly string[],
  mesh: string,
  item: VipItem,
  deps: ReconcileDeps,
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

/**
 * Retracts memberships this pass asserted that the committed item does not list. A membership
 * of the committed incarnation is removed only up to the committed version (a later writer may
 * have asserted it again); one of any other incarnation is dead (deleted, or our own create
 * that lost) and no one can commit it any more, so it is removed whatever its version.
 */
export async function retract(
  mesh: string,
  deps: ReconcileDeps,
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
