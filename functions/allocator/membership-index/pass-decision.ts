import { type Contribution, dataplaneId } from "../../domain/contributions.ts";
import type { MembershipIndex } from "../../store/ports.ts";

/** One dataplane's entries this batch changed in the index (decision 073). */
export interface EntryChange {
  /** The dataplane's id (domain/contributions.ts). */
  readonly dataplane: string;
  /** Pairs it contributes now and its record did not list (entries written by this batch). */
  readonly added: readonly Contribution[];
  /** Pairs whose entries this batch removed. */
  readonly removed: readonly Contribution[];
  /**
   * Of `removed`, the pairs the dataplane's record did not list: entries an earlier attempt
   * may have written and died before recording (decision 110). Each needs a pass whatever the
   * read finds.
   */
  readonly unrecorded?: readonly Contribution[];
}

export interface PassDecision {
  /** Meshes a presence may have changed in: their pass must run. */
  readonly meshes: Set<string>;
  /** The pairs whose presence may have changed: what those passes must look at. */
  readonly pairs: Contribution[];
  /** Pairs found present (a first contributor exists) by the decision's read. */
  readonly present: Contribution[];
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
          adders.has(dataplaneId(contributor)) ||
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
