import type { ClaimsPort, PassState } from "../../store/ports.ts";
import type { MeshOutcome } from "../pass/outcome.ts";
import type { Telemetry } from "../telemetry.ts";

/**
 * Besides presence (decision 073), what makes a touched mesh's pass necessary (decision 055):
 * the contract has every record that touches a mesh bring its item up to date with the tables,
 * the configuration and the quarantines as they are then. A mesh whose services kept their
 * presence still needs its pass when
 * - it is waiting for an address (its item lists unallocated services: a quarantine may have
 *   ended since), or
 * - the range its item was last recorded in is not the range this invocation runs with
 *   (`VIP_CIDR` changed: its VIPs outside the new range are renumbered), or is not known.
 * One strongly consistent read of the claims table per batch (the waiting item and the meshes'
 * range records). Both are written tied to the item revision they describe (decisions 111,
 * 112), so a pass held after its item write can never make them say less than a newer pass
 * did.
 */
export interface PassGuard {
  /** Touched meshes without a change of presence whose pass is still needed. */
  readonly needed: ReadonlySet<string>;
  /** What the guard read, before any pass of the batch read an item. */
  readonly state: PassState;
  /** The meshes whose range record it read. */
  readonly read: ReadonlySet<string>;
}

export async function guardPasses(
  claims: ClaimsPort,
  touched: readonly string[],
  passes: ReadonlySet<string>,
  cidr: string,
): Promise<PassGuard> {
  if (touched.length === 0) {
    return { needed: new Set(), state: { waiting: new Map(), ranges: new Map() }, read: new Set() };
  }
  const state = await claims.getPassState(touched);
  const needed = new Set(
    touched.filter(
      (mesh) =>
        !passes.has(mesh) && (state.waiting.has(mesh) || state.ranges.get(mesh)?.cidr !== cidr),
    ),
  );
  return { needed, state, read: new Set(touched) };
}

/**
 * After the passes: the range record of each mesh whose completed pass left an item, when the
 * guard read a record that says another range (or none), or when the pass moved the item into
 * another range (or created it): `range#<mesh>` then names the item's range and revision
 * (decision 112). The write keeps a record of a newer version of the item, so of two passes
 * that overtook each other, the later version's range stays. A record of another incarnation
 * is overwritten only when the guard read it, before the pass read the item (so that
 * incarnation's item was gone). Failing here costs a pass again later (the next record under
 * the invocation's range finds the record differ), nothing more.
 */
export async function recordRanges(
  claims: ClaimsPort,
  outcomes: readonly MeshOutcome[],
  guard: PassGuard | undefined,
  telemetry: Telemetry,
): Promise<void> {
  for (const { mesh, left, rangeChanged, deferred } of outcomes) {
    // A deferred pass's item still has services outside the range or pending (decision 160).
    if (left === undefined || deferred === true) continue;
    const read = guard?.read.has(mesh) === true;
    const recorded = guard?.state.ranges.get(mesh);
    if (!(read && recorded?.cidr !== left.cidr) && rangeChanged !== true) continue;
    const other = read ? recorded?.revision?.incarnation : undefined;
    const seen = other !== undefined && other !== left.incarnation ? other : undefined;
    try {
      await claims.setMeshRange(mesh, left.cidr, left, seen);
    } catch (error) {
      telemetry.warn("could not record a mesh's range; its next record passes it again", {
        mesh,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
}
