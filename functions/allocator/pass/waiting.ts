import type { VipItem } from "../../domain/types.ts";
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
 */
export async function waitingAndWake(
  mesh: string,
  deps: ReconcileDeps,
  was: boolean,
  now: boolean,
  released: number,
): Promise<string[]> {
  if (now) await deps.claims.setWaiting(mesh, true);
  else if (was) await deps.claims.setWaiting(mesh, false);
  if (released === 0 || deps.quarantineSeconds !== 0) return [];
  return (await deps.claims.getWaiting()).filter((other) => other !== mesh);
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
