import { VersionConflictError, VipItemTooLargeError } from "../../domain/errors.ts";
import { buildContent, sameContent } from "../../domain/plan.ts";
import { freedAtOnce } from "../../domain/pool.ts";
import { own, recordOf } from "../../domain/records.ts";
import type { VipItem } from "../../domain/types.ts";
import type { ItemRevision } from "../../store/ports.ts";
import { METRIC } from "../telemetry-names.ts";
import {
  type Attempt,
  inputsStill,
  itemLeft,
  outcome,
  type ReconcileDeps,
  settled,
} from "./deps.ts";
import { type Asserted, joinMesh, leaveAll, retract, retractPast } from "./memberships.ts";
import type { Claimed } from "./plan-and-claim.ts";

/**
 * Steps 3 and 4 of a pass: the item is written (conditional on the revision read before the
 * plan) unless its content is unchanged, then the services it no longer lists leave the mesh,
 * and what this pass asserted beyond the written item is retracted. An unchanged item still
 * finishes a leave an earlier write left undone; an item too large keeps the last good one.
 */
export async function commitItem(
  mesh: string,
  current: VipItem | undefined,
  services: readonly string[],
  claimed: Claimed,
  deps: ReconcileDeps,
  asserted: Asserted,
  attempt: number,
): Promise<Attempt> {
  const { plan, unallocated, finder, pending } = claimed;
  const content = buildContent(claimed.assigned, unallocated, deps.pool.cidr, pending);
  if (current !== undefined && sameContent(current, content)) {
    return await unchanged(mesh, current, claimed, deps, asserted, attempt);
  }

  // Services that left, and renumbered services that found no address in the new range: the
  // item no longer lists them, so the mesh leaves their claims (recorded on the item first, so
  // a pass after a crash between the write and the leave finishes it).
  // (A service the new item lists with an address is never leaving: this pass asserted it.)
  const leaving = [
    ...new Set([
      ...plan.removed.keys(),
      ...[...plan.outOfRange.keys()].filter((service) => unallocated.has(service)),
      ...claimed.stillMembers,
    ]),
  ].filter((service) => own(content.vips, service) === undefined);
  const { version, incarnation } = claimed.membership;
  const item: VipItem = {
    mesh,
    version,
    vips: content.vips,
    cidr: content.cidr,
    updatedAt: new Date(deps.now()).toISOString(),
    ...(unallocated.size > 0 ? { unallocated: content.unallocated } : {}),
    ...(pending.length > 0 ? { pending: content.pending } : {}),
    incarnation,
    renumberings: claimed.renumberings,
    ...(leaving.length > 0 ? { leaving } : {}),
  };
  const { telemetry } = deps;
  let bytes: number;
  try {
    const write = await deps.vipItems.put(item, current);
    // Lost: the pass goes round after its backoff and reads the item then (decision 054: the
    // item the write found would be older than that read by the whole backoff).
    if (!write.written)
      throw new VersionConflictError(`VIP item of mesh ${mesh}`, current?.version);
    bytes = write.bytes;
  } catch (error) {
    if (!(error instanceof VipItemTooLargeError)) throw error;
    // Retrying cannot help: the mesh keeps its last good item, the services this pass would
    // have added are reported, and the batch goes on. Their claims stay (a version this pass
    // could not write may yet be written by another pass that lists them: a claim kept longer
    // is safe, a listed VIP without its claim is not).
    await retract(mesh, deps, asserted, current);
    const notWritten = Object.keys(content.vips).filter((s) => own(current?.vips, s) === undefined);
    telemetry.metric(METRIC.itemTooLarge, "Count", 1);
    telemetry.error("VIP item too large: the mesh keeps its last good item", {
      mesh,
      code: error.code,
      bytes: error.bytes,
      limit: error.limit,
      keptVersion: current?.version,
      servicesNotWritten: notWritten.slice(0, 50),
      servicesNotWrittenCount: notWritten.length,
    });
    return settled({
      ...outcome(mesh, "unchanged", current?.version, {}, {}, [...unallocated.keys()], attempt),
      ...(current !== undefined ? { left: itemLeft(current) } : {}),
    });
  }
  telemetry.metric(METRIC.meshWrites, "Count", 1);
  telemetry.metric(METRIC.itemBytes, "Bytes", bytes);

  // Leave: the services the written item no longer lists, then what this pass asserted beyond.
  const released = await leaveAll(leaving, mesh, item, deps);
  if (released > 0) finder.freed();
  await retract(mesh, deps, asserted, item);
  if (current === undefined) await reassertAfterCreate(item, deps);
  const { added, renumbered } = claimed;
  const removed = recordOf(plan.removed);
  const allocations = Object.keys(added).length;
  if (allocations > 0) telemetry.metric(METRIC.allocations, "Count", allocations);
  if (released > 0) telemetry.metric(METRIC.releases, "Count", released);
  telemetry.info("mesh VIP item written", {
    mesh,
    version,
    services: Object.keys(content.vips).length,
    added,
    removed,
    unallocated: unallocated.size,
    bytes,
  });
  const waits = unallocated.size > 0 || pending.length > 0;
  const wake = await waitingAndWake(mesh, deps, waiting(current), waits, released, item);
  if (claimed.deferred) deps.budget?.defer(mesh);
  const written = {
    ...outcome(
      mesh,
      current === undefined ? "created" : "updated",
      version,
      added,
      removed,
      [...unallocated.keys()],
      attempt,
    ),
    wake,
    left: itemLeft(item),
    rangeChanged: current?.cidr !== item.cidr,
    ...(Object.keys(renumbered).length > 0 ? { renumbered } : {}),
    ...(claimed.deferred ? { deferred: true as const } : {}),
  };
  // Out of time: the continuation reads the whole service set again and finishes the work, so
  // this pass neither checks its inputs again nor goes round (decision 160).
  if (claimed.deferred) return { outcome: written, settled: true };
  // With no quarantine, addresses released just now can serve the unallocated right away.
  const freedForWaiting =
    released > 0 && unallocated.size > 0 && freedAtOnce(deps.quarantineSeconds);
  // The write listed unallocated services and the mesh is on the waiting list (above): a pass
  // that released an address and read the list before this mesh was on it woke no one, so the
  // range is read once more. Either that release is seen here (the pass goes round and takes
  // the address), or it came after this mesh joined the list, and its wake-up reads the item
  // just written. No lost wake-up. Only without a quarantine does a release free an address.
  const missedWake =
    !freedForWaiting &&
    unallocated.size > 0 &&
    freedAtOnce(deps.quarantineSeconds) &&
    (await finder.anyFree());
  const fresh = await inputsStill(mesh, deps, true, services);
  return { outcome: written, settled: fresh && !freedForWaiting && !missedWake };
}

/** The content is what the item lists: no write; an earlier write's leave is finished. */
async function unchanged(
  mesh: string,
  current: VipItem,
  claimed: Claimed,
  deps: ReconcileDeps,
  asserted: Asserted,
  attempt: number,
): Promise<Attempt> {
  const { unallocated, stillMembers, finder, pending } = claimed;
  const left = await retractPast(mesh, deps, asserted, current);
  let releasedNow = 0;
  if (stillMembers.length > 0) {
    // The write that dropped them was not followed by the leave (a crash, a lost response):
    // finish it now.
    releasedNow = await leaveAll(stillMembers, mesh, current, deps);
    if (releasedNow > 0) {
      deps.telemetry.metric(METRIC.releases, "Count", releasedNow);
      finder.freed();
    }
  }
  const waits = unallocated.size > 0 || pending.length > 0;
  const wake = await waitingAndWake(mesh, deps, waiting(current), waits, releasedNow, left);
  if (claimed.deferred) deps.budget?.defer(mesh);
  return settled({
    ...outcome(mesh, "unchanged", left.version, {}, {}, [...unallocated.keys()], attempt),
    wake,
    left: itemLeft(left),
    ...(claimed.deferred ? { deferred: true as const } : {}),
  });
}

/**
 * After a create: a concurrent create of the same mesh (another incarnation, which then lost
 * its write) may have overwritten the memberships this item's services hold with its own,
 * before this pass's write; if that pass then failed before it saw this item, nothing would
 * put them back, and the services would be held by a dead incarnation. The claims of the
 * listed services are read once and any membership of another incarnation is asserted again
 * for this item's (a create happens once per mesh life, so the read is rare).
 */
async function reassertAfterCreate(item: VipItem, deps: ReconcileDeps): Promise<void> {
  const services = Object.keys(item.vips);
  if (services.length === 0) return;
  const claims = await deps.claims.getServices(services);
  for (const service of services) {
    const claim = claims.get(service);
    const vip = own(item.vips, service);
    if (claim === undefined || vip === undefined || claim.vip !== vip) continue;
    const held = claim.meshes.get(item.mesh);
    if (held?.incarnation === item.incarnation) continue;
    await joinMesh(deps.claims, {
      service,
      vip,
      mesh: item.mesh,
      membership: { incarnation: item.incarnation, version: item.version },
      resume: claim.releasedAt !== undefined,
    });
  }
}

/** Whether the item lists services left without an address (unallocated, or still pending). */
export function waiting(item: VipItem | undefined): boolean {
  return Object.keys(item?.unallocated ?? {}).length > 0 || (item?.pending ?? []).length > 0;
}

/**
 * Keeps the claims' list of meshes that wait for an address (their items list unallocated
 * services), and, when this pass freed addresses with no quarantine to wait for, returns the
 * other waiting meshes: the invocation reconciles them again now (invariant 10: nothing stays
 * unallocated while an address is free). Addresses freed by a quarantine running out are
 * found by the next pass of the mesh.
 *
 * The entry is tied to `item`, the item this pass left (decision 111): joining names it, and
 * leaving removes only an entry of an older version of it, or of an incarnation the caller saw
 * on the list before the pass read the item (a dead one). So a pass held after its item write
 * can never take the mesh off the list after a newer pass put it on. A pass that leaves the
 * item not waiting also removes an entry the caller saw although the item did not wait (one a
 * held pass put back late).
 */
export async function waitingAndWake(
  mesh: string,
  deps: ReconcileDeps,
  was: boolean,
  now: boolean,
  released: number,
  item: ItemRevision,
): Promise<string[]> {
  if (now) await deps.passState.setWaiting(mesh, { waiting: true, item });
  else if (was || deps.waitingEntry !== undefined) await leaveWaiting(mesh, deps, item);
  if (released === 0 || !freedAtOnce(deps.quarantineSeconds)) return [];
  return (await deps.passState.getWaiting()).filter((other) => other !== mesh);
}

/**
 * Takes `mesh` off the waiting list for `item` (not waiting); an entry of another incarnation
 * the caller saw before the pass goes too.
 */
export async function leaveWaiting(
  mesh: string,
  deps: ReconcileDeps,
  item: ItemRevision,
): Promise<void> {
  const other = deps.waitingEntry?.revision?.incarnation;
  const seen = other !== undefined && other !== item.incarnation ? other : undefined;
  await deps.passState.setWaiting(mesh, {
    waiting: false,
    item,
    ...(seen !== undefined ? { seen } : {}),
  });
}

/** Rounds of passes of woken meshes in one invocation (a wake-up may wake others). */
const WAKE_ROUNDS = 3;

/**
 * The woken-meshes loop of an invocation (the batch step and the sweep): meshes waiting for an
 * address that its passes freed (no quarantine) are passed again now, a bounded number of
 * rounds; `pass` adds to `woken` the meshes its passes wake in turn. `woken` is empty after.
 */
export async function passWoken(
  woken: Set<string>,
  pass: (meshes: readonly string[]) => Promise<void>,
): Promise<void> {
  for (let round = 0; round < WAKE_ROUNDS && woken.size > 0; round++) {
    const meshes = [...woken].sort();
    woken.clear();
    await pass(meshes);
  }
  woken.clear();
}
