import { VersionConflictError } from "../../domain/errors.ts";
import { recordOf } from "../../domain/records.ts";
import type { VipItem } from "../../domain/types.ts";
import type { ItemRevision, VipItemStore } from "../../store/ports.ts";
import { METRIC } from "../telemetry-names.ts";
import { leaveWaiting, waiting, waitingAndWake } from "./commit-item.ts";
import type { ReconcileDeps } from "./deps.ts";
import { type Attempt, inputsStill, outcome, settled } from "./deps.ts";
import { type Asserted, type FailureState, leaveDeletedItem, retract } from "./memberships.ts";

/**
 * Step 1 of a pass, for a mesh that no longer exists: its item is emptied (its services
 * recorded as leaving), its services leave the mesh, then the item is deleted (a failure in
 * between is finished by {@link settleAfterFailure}, or else by the next pass of the mesh,
 * which finds the emptied item), and the meshes waiting for an address are woken if that freed
 * some.
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
  // Emptied first, every service it listed recorded as leaving (one conditional write), then
  // its services leave, then it goes: a failure anywhere before the end leaves an item whose
  // leaves a later pass of the mesh finishes (decision 117).
  const emptied = await emptyItem(deps, current);
  failure.deleted = emptied;
  const released = await leaveDeletedItem(mesh, emptied, deps);
  await deleteItem(deps.vipItems, emptied);
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
 * The deleted mesh's item with no services, every one it listed (or was leaving) recorded in
 * `leaving`, written over `current` (an item already empty is kept as it is).
 */
async function emptyItem(deps: ReconcileDeps, current: VipItem): Promise<VipItem> {
  const listed = Object.keys(current.vips);
  if (listed.length === 0 && Object.keys(current.unallocated ?? {}).length === 0) return current;
  const { unallocated: _, ...rest } = current;
  const emptied: VipItem = {
    ...rest,
    version: current.version + 1,
    vips: {},
    updatedAt: new Date(deps.now()).toISOString(),
    leaving: [...new Set([...listed, ...(current.leaving ?? [])])],
  };
  const write = await deps.vipItems.put(emptied, current);
  if (!write.written) {
    throw new VersionConflictError(`VIP item of mesh ${current.mesh}`, current.version);
  }
  return emptied;
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
