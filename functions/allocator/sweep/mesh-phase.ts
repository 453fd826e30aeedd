import { contributorId } from "../../domain/contributions.ts";
import { meshIndexDrift } from "../membership-index/rebuild.ts";
import type { AddressFinder } from "../pass/address-finder.ts";
import { passWoken } from "../pass/commit-item.ts";
import { listedServices } from "../pass/service-set-view.ts";
import { driftDetail } from "./repairs.ts";
import type { Pending, SweepRun } from "./run.ts";
import type { Repair } from "./types.ts";

/**
 * Phase 1, each mesh of the meshes table: its part of the membership index is compared with
 * the dataplanes table and repaired, then the mesh gets an ordinary pass (same claims and
 * version conditions as the event path). (The claims of the services its item lists are
 * checked for its membership in the claims audit, phase 3.)
 */

/**
 * One mesh of the meshes phase. With a grace (decision 071), a read-only first look comes
 * first: drift found is left for the second look (undefined: pending); a clean mesh gets its
 * pass at once, and whatever that pass still changes appeared after the look (in flight).
 */
export async function sweepMesh(run: SweepRun, mesh: string): Promise<Repair[] | undefined> {
  if (!run.deferring()) return await correctMesh(run, mesh, false);
  const look = await firstLook(run, mesh);
  if (look !== undefined) {
    run.pending.push({ ...look, phase: "meshes", name: mesh, at: run.settings.now() });
    return undefined;
  }
  return await correctMesh(run, mesh, true);
}

/** What a first look at a mesh found, or undefined when it looks clean. */
type FirstLook = Omit<Pending, "phase" | "name" | "at"> | undefined;

/**
 * Read-only: the mesh's index against the dataplanes table (eventually consistent, as the
 * sweep's detection), and its item against the index's service set and the range. What it
 * found, or undefined when the mesh looks clean. One GetItem more than a correction reads.
 */
async function firstLook(run: SweepRun, mesh: string): Promise<FirstLook> {
  const { ports } = run;
  const { drift, issues, services } = await meshIndexDrift(
    mesh,
    ports.source,
    run.detected,
    ports.index,
    run.strong,
  );
  if (drift.length > 0) return { found: `index-drift: ${drift.length} dataplanes`, drift };
  for (const issue of issues) ports.telemetry.badInput(issue);
  const item = await ports.vipItems.get(mesh);
  const at = { version: item?.version ?? null, incarnation: item?.incarnation ?? null };
  if (item === undefined) return { found: "item-missing", item: at };
  const listed = new Set(listedServices(item));
  if (listed.size !== services.length || services.some((service) => !listed.has(service))) {
    return { found: "item-services", item: at };
  }
  for (const vip of Object.values(item.vips)) {
    if (run.settings.pool.canonical(vip) === undefined) {
      return { found: "item-renumbered", item: at };
    }
  }
  return undefined;
}

/**
 * The second look at a mesh. Index drift is a fault only where the dataplane's record has not
 * moved since the first look (the event path did not touch it in a whole grace) and the table
 * still disagrees; drift of records that moved, or that is new, is the event path's work in
 * flight and left to it. The pass then counts as a fault after a confirmed index repair, or
 * when the first look found the item wrong and the item has not moved since; otherwise what
 * it changes is in flight.
 */
export async function secondLookMesh(run: SweepRun, first: Pending): Promise<Repair[]> {
  const { ports } = run;
  const mesh = first.name;
  const before = run.repairs.length;
  const { drift, issues } = await meshIndexDrift(
    mesh,
    ports.source,
    run.detected,
    ports.index,
    true,
  );
  for (const issue of issues) ports.telemetry.badInput(issue);
  const earlier = new Map(
    (first.drift ?? []).map((found) => [contributorId(found.dataplane), found.recordVersion]),
  );
  const persisted = drift.filter((found) => {
    const id = contributorId(found.dataplane);
    return earlier.has(id) && earlier.get(id) === found.recordVersion;
  });
  const confirmed = await run.corrector.repairIndex(mesh, persisted, run.reported);
  for (const found of confirmed) run.reported.add(contributorId(found.dataplane));
  for (const found of confirmed) {
    run.record({ kind: "index-drift", mesh, detail: driftDetail(found) });
  }
  let inFlight = confirmed.length === 0;
  if (inFlight && first.item !== undefined) {
    const item = await ports.vipItems.get(mesh);
    inFlight =
      (item?.version ?? null) !== first.item.version ||
      (item?.incarnation ?? null) !== first.item.incarnation;
  }
  await run.recording(inFlight, () => passMesh(run, mesh));
  return run.repairs.slice(before);
}

/**
 * The mesh's correction: index drift (read again, strongly), then a pass. After a clean first
 * look the index agreed with the table a moment ago: the pass alone.
 */
async function correctMesh(run: SweepRun, mesh: string, afterCleanLook: boolean) {
  return await run.recording(afterCleanLook, async () => {
    if (!afterCleanLook) await sweepIndex(run, mesh);
    await passMesh(run, mesh);
  });
}

/** The mesh's pass over its whole service set (dry: what it would change). */
async function passMesh(run: SweepRun, mesh: string): Promise<void> {
  const { repairs, wake } = await run.corrector.passMesh(mesh, run.wholeView());
  for (const repair of repairs) run.record(repair);
  for (const other of wake) run.woken.add(other);
}

async function sweepIndex(run: SweepRun, mesh: string): Promise<void> {
  const { ports } = run;
  const { drift, issues } = await meshIndexDrift(
    mesh,
    ports.source,
    run.detected,
    ports.index,
    run.strong,
  );
  for (const issue of issues) ports.telemetry.badInput(issue);
  const confirmed = await run.corrector.repairIndex(mesh, drift, run.reported);
  for (const found of confirmed) run.reported.add(contributorId(found.dataplane));
  for (const found of confirmed) {
    run.record({ kind: "index-drift", mesh, detail: driftDetail(found) });
  }
}

/**
 * Meshes waiting for an address that a pass of this sweep freed (no quarantine): passed again
 * now, a bounded number of rounds, as the event path does (a dry run wakes none). `finder`:
 * an address finder of their own (default: the invocation's).
 */
export async function passWokenMeshes(run: SweepRun, finder?: AddressFinder): Promise<void> {
  await passWoken(run.woken, async (meshes) => {
    for (const mesh of meshes) {
      if (!run.covers(mesh)) continue;
      const { repairs, wake } = await run.corrector.passWoken(mesh, run.wholeView(), finder);
      for (const repair of repairs) run.record(repair);
      for (const other of wake) run.woken.add(other);
    }
  });
}
