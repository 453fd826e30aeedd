import { type Contribution, contributorId } from "../../domain/contributions.ts";
import type { InputIssue } from "../../domain/errors.ts";
import type {
  MembershipIndex,
  PassState,
  PassStatePort,
  PendingUpdate,
} from "../../store/ports.ts";
import {
  type DataplaneChange,
  type EntryChange,
  type PassDecision,
  updateIndex,
} from "../membership-index/update.ts";
import type { MeshOutcome } from "../pass/deps.ts";
import type { ServiceSetView } from "../pass/service-set-view.ts";
import { indexView } from "../pass/service-set-view.ts";
import type { Telemetry } from "../telemetry.ts";

/**
 * Which touched meshes a batch passes: the one place that decides it. A mesh the batch touched
 * is passed when any of these holds, and skipped otherwise (its item already says what the
 * tables say):
 *
 * | reason                                                                  | decision   |
 * | ----------------------------------------------------------------------- | ---------- |
 * | the mesh's own record is in the batch (created, changed, deleted)       | 073        |
 * | a service may have appeared or left: its first contributor is gone, or | 073        |
 * |   is a dataplane this batch added                                       |            |
 * | an entry removed that its dataplane's record never listed               | 110        |
 * | a dataplane's record carries the mesh's pass as pending (an earlier     | 073        |
 * |   delivery died before its pass completed)                              |            |
 * | a dataplane's record could not be written (its pending pairs are lost)  | 073        |
 * | the mesh waits for an address (a quarantine may have ended since)       | 055, 111   |
 * | its recorded range is not this invocation's (VIP_CIDR changed) or none  | 055, 112   |
 *
 * Without the index (the full recompute the tests and the benches use as an oracle) every
 * touched mesh is passed, over the tables.
 */
export interface PassPlan {
  /** The touched meshes to pass, sorted. */
  readonly meshes: readonly string[];
  /** Touched meshes whose pass is skipped. */
  readonly skipped: number;
  /** The service set a pass of `mesh` reads (undefined: the tables, a full recompute). */
  viewFor(mesh: string): ServiceSetView | undefined;
  /** What the guard read, before any pass read an item (undefined: no index). */
  readonly guard: PassGuard | undefined;
  /** Records carrying pending pairs: after the passes, the completed meshes' pairs go. */
  readonly pending: readonly PendingUpdate[];
  readonly issues: readonly InputIssue[];
  /** Index records written (their entries changed). */
  readonly indexWrites: number;
}

/** A batch as the planner needs it (decoded, bad records already skipped). */
export interface BatchInput {
  /** mesh -> sequence numbers of the records that touch it; the planner adds a dataplane's
   * records to every mesh its earlier contributions name (a failure there retries them). */
  readonly byMesh: Map<string, string[]>;
  readonly changes: readonly DataplaneChange[];
  /** Meshes whose own record is in the batch: their passes read the whole service set. */
  readonly meshRecords: ReadonlySet<string>;
}

/**
 * Brings the index up to date with the batch's dataplane records (entries, the decision's
 * read, records with their pending pairs: membership-index/update.ts), reads the guard's
 * state, and returns which meshes to pass and through which view.
 */
export async function planPasses(
  batch: BatchInput,
  ports: { readonly index?: MembershipIndex; readonly passState: PassStatePort },
  cidr: string,
): Promise<PassPlan> {
  const touched = () => [...batch.byMesh.keys()].sort();
  const { index } = ports;
  if (index === undefined) {
    const meshes = touched();
    return {
      meshes,
      skipped: 0,
      viewFor: () => undefined,
      guard: undefined,
      pending: [],
      issues: [],
      indexWrites: 0,
    };
  }
  const update = await updateIndex(batch.changes, index, decidePasses);
  for (const change of batch.changes) {
    for (const mesh of update.meshesOf.get(contributorId(change.key)) ?? []) {
      addSequence(batch.byMesh, mesh, change.sequence);
    }
  }
  const passes = new Set([
    ...update.decided,
    ...update.carried,
    ...update.unrecorded,
    ...batch.meshRecords,
  ]);
  const touchedMeshes = touched();
  const guard = await guardPasses(ports.passState, touchedMeshes, passes, cidr);
  const meshes = touchedMeshes.filter((mesh) => passes.has(mesh) || guard.needed.has(mesh));
  return {
    meshes,
    skipped: touchedMeshes.length - meshes.length,
    viewFor: (mesh) =>
      indexView(
        index,
        batch.meshRecords.has(mesh) ? "all" : (update.touched.get(mesh) ?? new Set()),
        update.known.get(mesh),
        update.touched.get(mesh),
      ),
    guard,
    pending: update.pending,
    issues: update.issues,
    indexWrites: update.written,
  };
}

/** Adds `sequence` to the records of `mesh`. */
export function addSequence(byMesh: Map<string, string[]>, mesh: string, sequence: string): void {
  const list = byMesh.get(mesh);
  if (list === undefined) byMesh.set(mesh, [sequence]);
  else if (!list.includes(sequence)) list.push(sequence);
}

/**
 * Which meshes the batch's entry changes require a pass for, read after the entries are
 * written (decision 073). Per (mesh, service) whose entries changed, one strongly consistent
 * `Limit: 1` Query finds its first contributor (lowest dataplane id):
 * - none: the service may have left the mesh (the last contributor's removal), pass;
 * - one this batch added: the service may have just appeared, pass;
 * - another dataplane: no pass for this pair, and a pass of its mesh for other pairs need not
 *   look at it. The service was present before this batch's write, or another invocation
 *   added that contributor, and of all the contributors added since the service was last
 *   absent the one with the lowest id finds itself first and passes.
 * Two removals of the last two contributors at once: each reads after its own write, so the
 * later read sees neither and passes. Over-approximates (a new lowest-id instance of a present
 * service passes); never misses a change of presence.
 *
 * An entry removed that the dataplane's record did not list (`unrecorded`) was written by an
 * attempt that died between its entries and its record (or is one of this batch's own images):
 * another invocation may have skipped its pass because that entry came first, trusting the dead
 * attempt to pass. Its pair needs a pass whatever the read finds (decision 110).
 */
export async function decidePasses(
  index: MembershipIndex,
  changes: readonly EntryChange[],
): Promise<PassDecision> {
  /** mesh -> service -> dataplanes of this batch that added it */
  const changed = new Map<string, Map<string, Set<string>>>();
  /** Pairs that need a pass whatever the read finds (unrecorded entries removed). */
  const forced = new Set<string>();
  const note = (pair: Contribution, adder: string | undefined) => {
    let services = changed.get(pair.mesh);
    if (services === undefined) {
      services = new Map();
      changed.set(pair.mesh, services);
    }
    let adders = services.get(pair.service);
    if (adders === undefined) {
      adders = new Set();
      services.set(pair.service, adders);
    }
    if (adder !== undefined) adders.add(adder);
  };
  for (const change of changes) {
    for (const pair of change.added) note(pair, change.dataplane);
    for (const pair of change.removed) note(pair, undefined);
    for (const pair of change.unrecorded ?? []) {
      note(pair, undefined);
      forced.add(JSON.stringify([pair.mesh, pair.service]));
    }
  }
  const meshes = new Set<string>();
  const pairs: Contribution[] = [];
  const present: Contribution[] = [];
  await Promise.all(
    [...changed].map(async ([mesh, services]) => {
      const first = await index.firstContributors(mesh, [...services.keys()]);
      for (const [service, adders] of services) {
        const contributor = first.get(service);
        if (contributor !== undefined) present.push({ mesh, service });
        if (
          contributor === undefined ||
          adders.has(contributorId(contributor)) ||
          forced.has(JSON.stringify([mesh, service]))
        ) {
          meshes.add(mesh);
          pairs.push({ mesh, service });
        }
      }
    }),
  );
  return { meshes, pairs, present };
}

/**
 * Besides presence (decision 073), what makes a touched mesh's pass necessary (decision 055):
 * the contract has every record that touches a mesh bring its item up to date with the tables,
 * the configuration and the quarantines as they are then. A mesh whose services kept their
 * presence still needs its pass when
 * - it is waiting for an address (its item lists unallocated services: a quarantine may have
 *   ended since), or
 * - the range its item was last recorded in is not the range this invocation runs with
 *   (`VIP_CIDR` changed: its VIPs outside the new range are renumbered), or is not known.
 * One strongly consistent read of the pass state per batch (the waiting item and the meshes'
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
  passState: PassStatePort,
  touched: readonly string[],
  passes: ReadonlySet<string>,
  cidr: string,
): Promise<PassGuard> {
  if (touched.length === 0) {
    return { needed: new Set(), state: { waiting: new Map(), ranges: new Map() }, read: new Set() };
  }
  const state = await passState.getPassState(touched);
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
  passState: PassStatePort,
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
      await passState.setMeshRange(mesh, left.cidr, left, seen);
    } catch (error) {
      telemetry.warn("could not record a mesh's range; its next record passes it again", {
        mesh,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  }
}
