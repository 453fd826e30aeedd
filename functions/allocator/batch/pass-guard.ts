import type { ClaimsPort } from "../../store/ports.ts";
import type { Telemetry } from "../telemetry.ts";

/**
 * Besides presence (decision 073), what makes a touched mesh's pass necessary (decision 055):
 * the contract has every record that touches a mesh bring its item up to date with the tables,
 * the configuration and the quarantines as they are then. A mesh whose services kept their
 * presence still needs its pass when
 * - it is waiting for an address (its item lists unallocated services: a quarantine may have
 *   ended since), or
 * - the range it was last passed under is not the range this invocation runs with (`VIP_CIDR`
 *   changed: its VIPs outside the new range are renumbered), or is not known.
 * One strongly consistent read of the claims table per batch (the waiting item and the meshes'
 * range records).
 */
export interface PassGuard {
  /** Touched meshes without a change of presence whose pass is still needed. */
  readonly needed: ReadonlySet<string>;
  /** Meshes whose recorded range is not `cidr`: recorded after their pass completes. */
  readonly unrecorded: ReadonlySet<string>;
}

export async function guardPasses(
  claims: ClaimsPort,
  touched: readonly string[],
  passes: ReadonlySet<string>,
  cidr: string,
): Promise<PassGuard> {
  if (touched.length === 0) return { needed: new Set(), unrecorded: new Set() };
  const state = await claims.getPassState(touched);
  const unrecorded = new Set(touched.filter((mesh) => state.ranges.get(mesh) !== cidr));
  const needed = new Set(
    touched.filter(
      (mesh) => !passes.has(mesh) && (state.waiting.has(mesh) || unrecorded.has(mesh)),
    ),
  );
  return { needed, unrecorded };
}

/**
 * After the passes: the range of every mesh whose pass completed under `cidr` (a completed
 * pass leaves the item in the invocation's range) and whose record said otherwise. Failing here
 * costs a pass again later, nothing more.
 */
export async function recordRanges(
  claims: ClaimsPort,
  meshes: Iterable<string>,
  cidr: string,
  telemetry: Telemetry,
): Promise<void> {
  for (const mesh of meshes) {
    try {
      await claims.setMeshRange(mesh, cidr);
    } catch (error) {
      telemetry.warn("could not record a mesh's range; its next record passes it again", {
        mesh,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
}
