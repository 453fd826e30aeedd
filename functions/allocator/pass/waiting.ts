import type { VipItem } from "../../domain/types.ts";
import type { ItemRevision } from "../../store/ports.ts";
import type { ReconcileDeps } from "./deps.ts";

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
  if (now) await deps.claims.setWaiting(mesh, { waiting: true, item });
  else if (was || deps.waitingEntry !== undefined) await leaveWaiting(mesh, deps, item);
  if (released === 0 || deps.quarantineSeconds !== 0) return [];
  return (await deps.claims.getWaiting()).filter((other) => other !== mesh);
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
  await deps.claims.setWaiting(mesh, {
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
