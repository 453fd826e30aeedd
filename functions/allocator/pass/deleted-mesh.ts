import { VersionConflictError } from "../../domain/errors.ts";
import { recordOf } from "../../domain/records.ts";
import type { VipItem } from "../../domain/types.ts";
import type { ItemRevision, VipItemStore } from "../../store/ports.ts";
import { METRIC } from "../telemetry-names.ts";
import type { ReconcileDeps } from "./deps.ts";
import { inputsStill } from "./inputs.ts";
import { type Asserted, type FailureState, leaveDeletedItem, retract } from "./memberships.ts";
import { type Attempt, outcome, settled } from "./outcome.ts";
import { leaveWaiting, waiting, waitingAndWake } from "./waiting.ts";

/**
 * Step 1 of a pass, for a mesh that no longer exists: its item is deleted, then its services
 * leave the mesh (a failure in between is finished by {@link settleAfterFailure}), and the
 * meshes waiting for an address are woken if that freed some.
 */
export async function passDeletedMesh(
  mesh: string,
  current: VipItem | undefined,
  deps: ReconcileDeps,
  asserted: Asserted,
  failure: FailureState,
  attempt: number,
): Promise<Attempt> {
  const { telemetry } = deps;
  if (current === undefined) {
    await retract(mesh, deps, asserted, undefined);
    // An entry the caller saw on the waiting list names an incarnation whose item is gone.
    const seen = deps.waitingEntry?.revision;
    if (deps.waitingEntry !== undefined) {
      await leaveWaiting(mesh, deps, every(seen?.incarnation ?? ""));
    }
    return settled(outcome(mesh, "absent", undefined, {}, {}, [], attempt));
  }
  await deleteItem(deps.vipItems, current);
  failure.deleted = current;
  const released = await leaveDeletedItem(mesh, current, deps);
  failure.deleted = undefined;
  if (released > 0) {
    telemetry.metric(METRIC.releases, "Count", released);
    // With no quarantine the addresses are free now: the invocation's finder reads the range
    // again for the meshes this pass wakes.
    deps.addresses?.freed();
  }
  await retract(mesh, deps, asserted, undefined);
  telemetry.info("mesh deleted: VIP item removed, its services left the mesh", {
    mesh,
    version: current.version,
    services: Object.keys(current.vips).length,
    released,
  });
  const wake = await waitingAndWake(
    mesh,
    deps,
    waiting(current),
    false,
    released,
    every(current.incarnation),
  );
  const deleted = {
    ...outcome(
      mesh,
      "deleted",
      current.version,
      {},
      recordOf(Object.entries(current.vips)),
      [],
      attempt,
    ),
    wake,
  };
  return { outcome: deleted, settled: await inputsStill(mesh, deps, false, []) };
}

/**
 * Deletes a deleted mesh's item. A failed condition with no item left is a delete that landed
 * (this pass's, whose response was lost and whose retry by the SDK found the item gone, or a
 * concurrent pass's): the pass goes on to leave the item's services, which are conditional on
 * the item's incarnation and version and harmless if already done. Without this, a lost
 * response left every membership of the mesh behind for good.
 */
async function deleteItem(vipItems: VipItemStore, current: VipItem): Promise<void> {
  const write = await vipItems.delete(current.mesh, current);
  if (write.written) return;
  // The engine returns the item a failed condition found; none: the item is gone, or an engine
  // that does not say, so it is read.
  const found = write.found === "unknown" ? await vipItems.get(current.mesh) : write.found;
  if (found !== undefined) {
    throw new VersionConflictError(`VIP item of mesh ${current.mesh}`, current.version);
  }
}

/** Every version of `incarnation` (a deleted item's waiting entry goes, whatever its version). */
function every(incarnation: string): ItemRevision {
  return { incarnation, version: Number.MAX_SAFE_INTEGER };
}
