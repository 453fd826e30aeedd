import {
  RetriesExhaustedError,
  VersionConflictError,
  VipItemTooLargeError,
} from "../domain/errors.ts";
import {
  alignWithClaims,
  buildContent,
  exhaustedReason,
  planMesh,
  sameContent,
} from "../domain/plan.ts";
import type { VipPool } from "../domain/pool.ts";
import { reclaimCutoffMs } from "../domain/quarantine.ts";
import { emptyRecord, own, recordOf } from "../domain/records.ts";
import type { Membership, VipItem } from "../domain/types.ts";
import type { ClaimStore, MeshSource, VipItemStore } from "../store/ports.ts";
import { AddressFinder } from "./address-finder.ts";
import { BatchIngresses } from "./batch-ingresses.ts";
import { leaveMesh } from "./claim-decisions.ts";
import { type Asserted, leaveAll, retract } from "./memberships.ts";
import { obtainVip } from "./obtain-vip.ts";
import { type ServiceSetView, tablesView } from "./service-set-view.ts";
import type { Telemetry } from "./telemetry.ts";
import { METRIC } from "./telemetry-names.ts";

export interface ReconcileDeps {
  readonly source: MeshSource;
  readonly vipItems: VipItemStore;
  readonly claims: ClaimStore;
  readonly pool: VipPool;
  readonly quarantineSeconds: number;
  readonly maxAttempts: number;
  readonly telemetry: Telemetry;
  readonly now: () => number;
  readonly newId: () => string;
  readonly sleep: (ms: number) => Promise<void>;
  readonly random: () => number;
  /** The batch's shared read of the ingresses; absent: each pass reads them itself. */
  readonly ingresses?: BatchIngresses;
  /**
   * Where the pass gets the mesh's service set (the membership index, incremental); absent:
   * the full recompute from the tables.
   */
  readonly view?: ServiceSetView;
  /**
   * A finder shared by the meshes of one invocation (the caller flushes it). When absent,
   * each pass uses its own and flushes it.
   */
  readonly addresses?: AddressFinder;
}

/**
 * The deps of the passes of one invocation (a batch, or a sweep): one address finder, so its
 * meshes never race each other for an address, and one read of the ingresses.
 */
export function invocationDeps(
  ports: {
    readonly source: MeshSource;
    readonly vipItems: VipItemStore;
    readonly claims: ClaimStore;
    readonly telemetry: Telemetry;
  },
  settings: Pick<
    ReconcileDeps,
    "pool" | "quarantineSeconds" | "maxAttempts" | "now" | "newId" | "sleep" | "random"
  >,
): ReconcileDeps & { readonly addresses: AddressFinder; readonly ingresses: BatchIngresses } {
  return {
    source: ports.source,
    vipItems: ports.vipItems,
    claims: ports.claims,
    telemetry: ports.telemetry,
    pool: settings.pool,
    quarantineSeconds: settings.quarantineSeconds,
    maxAttempts: settings.maxAttempts,
    now: settings.now,
    newId: settings.newId,
    sleep: settings.sleep,
    random: settings.random,
    addresses: new AddressFinder(
      ports.claims,
      settings.pool,
      settings.now(),
      settings.quarantineSeconds,
    ),
    ingresses: new BatchIngresses(ports.source),
  };
}

export type MeshAction = "created" | "updated" | "deleted" | "unchanged" | "absent";

export interface MeshOutcome {
  readonly mesh: string;
  readonly action: MeshAction;
  readonly version: number | undefined;
  readonly added: Readonly<Record<string, string>>;
  readonly removed: Readonly<Record<string, string>>;
  readonly unallocated: readonly string[];
  readonly attempts: number;
  /** Of `added`, the services the item listed before at another VIP: service -> that VIP. */
  readonly renumbered?: Readonly<Record<string, string>>;
  /**
   * Meshes whose items list unallocated services, to reconcile again now: this pass freed
   * addresses and there is no quarantine to wait for.
   */
  readonly wake?: readonly string[];
}

/** Full-jitter backoff: random(0, min(cap, base * 2^attempt)). */
export function backoffMs(attempt: number, random: () => number, baseMs = 25, capMs = 1000) {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** attempt));
}

/**
 * Brings one mesh's VIP item up to date with the tables as they are now.
 *
 * Correctness under concurrency rests on two mechanisms:
 * - global claims (one per service, one per address) written with conditions, so two
 *   invocations can never give one address to two services, nor two VIPs to one service;
 * - the mesh item written with a condition on the version read *before* the computation, so
 *   a writer whose inputs went stale loses, re-reads, recomputes and retries (bounded, with
 *   full jitter).
 * Membership of a service in the mesh is asserted before the item that lists it is written,
 * and retracted only after an item without it is written, conditional on the version: a claim
 * can leak (safe) but a listed VIP can never be released.
 */
export async function reconcileMesh(mesh: string, deps: ReconcileDeps): Promise<MeshOutcome> {
  const asserted: Asserted = new Map();
  let lastError: unknown;
  for (let attempt = 1; attempt <= deps.maxAttempts; attempt++) {
    try {
      const result = await attemptOnce(mesh, deps, asserted, attempt);
      if (result.settled) return result.outcome;
      lastError = new VersionConflictError(`inputs of mesh ${mesh} (changed during the pass)`);
    } catch (error) {
      if (!(error instanceof VersionConflictError)) throw error;
      lastError = error;
      deps.telemetry.metric(METRIC.conflicts, "Count", 1);
      if (attempt < deps.maxAttempts) await deps.sleep(backoffMs(attempt, deps.random));
    }
  }
  throw new RetriesExhaustedError(mesh, deps.maxAttempts, lastError);
}

/**
 * After a write, the inputs are read again: the version condition protects against a stale
 * *item*, not against stale *tables*. A concurrent pass that read newer tables may have found
 * nothing to change and written nothing, so the last writer must check that what it wrote is
 * still what the tables say; if not, it goes round again.
 */
async function inputsStill(
  mesh: string,
  deps: ReconcileDeps,
  exists: boolean,
  services: readonly string[],
): Promise<boolean> {
  if ((await deps.source.meshExists(mesh)) !== exists) return false;
  if (!exists) return true;
  return await viewOf(deps).still(mesh, services);
}

function viewOf(deps: ReconcileDeps): ServiceSetView {
  return deps.view ?? tablesView(deps.source, deps.ingresses);
}

interface Attempt {
  readonly outcome: MeshOutcome;
  /** False when this pass wrote but must run again (inputs moved, or addresses were freed). */
  readonly settled: boolean;
}

async function attemptOnce(
  mesh: string,
  deps: ReconcileDeps,
  asserted: Asserted,
  attempt: number,
): Promise<Attempt> {
  const { source, vipItems, telemetry, pool } = deps;
  const [current, exists] = await Promise.all([vipItems.get(mesh), source.meshExists(mesh)]);
  if (exists && asserted.size > 0) {
    // An earlier attempt of this pass lost its write: settle its memberships against the item
    // that won now, before this attempt writes. (Left for the end, a crash right after this
    // attempt's write would leave memberships of the losing incarnation on listed services,
    // which no later leave could match.)
    await retract(mesh, deps, asserted, current);
  }

  if (!exists) {
    if (current === undefined) {
      await retract(mesh, deps, asserted, undefined);
      return settled(outcome(mesh, "absent", undefined, {}, {}, [], attempt));
    }
    await deleteItem(vipItems, current);
    let released = 0;
    for (const service of new Set([...Object.keys(current.vips), ...(current.leaving ?? [])])) {
      const result = await leaveMesh(deps.claims, {
        service,
        mesh,
        incarnation: current.incarnation,
        upToVersion: current.version,
        nowMs: deps.now(),
      });
      if (result === "released") released++;
    }
    if (released > 0) telemetry.metric(METRIC.releases, "Count", released);
    await retract(mesh, deps, asserted, undefined);
    telemetry.info("mesh deleted: VIP item removed, its services left the mesh", {
      mesh,
      version: current.version,
      services: Object.keys(current.vips).length,
      released,
    });
    const wake = await waitingAndWake(mesh, deps, waiting(current), false, released);
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

  const { services, issues } = await viewOf(deps).read(mesh, current, attempt);
  for (const issue of issues) telemetry.badInput(issue);

  // Read before the claims: a claim that moves after this read bumps the count again.
  const renumberings = await deps.claims.getRenumberings();
  const verify = current !== undefined && current.renumberings !== renumberings;
  const wanted = new Set(services);
  const priorLeaving = (current?.leaving ?? []).filter((service) => !wanted.has(service));
  let plan = planMesh(current, services, pool);
  const claimed = await deps.claims.getServices([
    ...new Set([...plan.needed, ...(verify ? plan.keep.keys() : []), ...priorLeaving]),
  ]);
  if (verify) {
    plan = alignWithClaims(
      plan,
      new Map([...claimed].map(([service, claim]) => [service, claim.vip])),
    );
  }
  // Services an earlier write dropped whose membership of this mesh is still recorded.
  const stillMembers = priorLeaving.filter(
    (service) =>
      current !== undefined &&
      claimed.get(service)?.meshes.get(mesh)?.incarnation === current.incarnation,
  );
  const incarnation = current?.incarnation ?? deps.newId();
  const version = (current?.version ?? 0) + 1;
  const membership: Membership = { incarnation, version };
  const assigned = new Map(plan.keep);
  const unallocated = new Map<string, string>();
  const added = emptyRecord<string>();
  const renumbered = emptyRecord<string>();
  const nowMs = deps.now();
  const finder =
    deps.addresses ?? new AddressFinder(deps.claims, pool, nowMs, deps.quarantineSeconds);
  const cutoffMs = reclaimCutoffMs(nowMs, deps.quarantineSeconds);

  // New addresses this pass will look for: services with no claim in the range.
  finder.expect(
    plan.needed.filter((service) => {
      const claim = claimed.get(service);
      return claim === undefined || pool.canonical(claim.vip) === undefined;
    }).length,
  );
  for (const service of plan.needed) {
    const vip = await obtainVip(service, {
      mesh,
      deps,
      finder,
      membership,
      nowMs,
      cutoffMs,
      prefetched: claimed,
    });
    if (vip === undefined) {
      unallocated.set(service, exhaustedReason(pool));
      continue;
    }
    asserted.set(service, membership);
    assigned.set(service, vip);
    added[service] = vip;
    const old = plan.outOfRange.get(service);
    if (old !== undefined) {
      renumbered[service] = old;
      telemetry.warn("service renumbered: its VIP lies outside VIP_CIDR", {
        mesh,
        service,
        from: old,
        to: vip,
        cidr: pool.cidr,
      });
      telemetry.metric(METRIC.renumbered, "Count", 1);
    }
  }
  if (deps.addresses === undefined) await flushFinder(finder, deps);
  if (unallocated.size > 0) {
    telemetry.metric(METRIC.exhausted, "Count", unallocated.size);
    telemetry.error("range exhausted: services left without a VIP", {
      mesh,
      cidr: pool.cidr,
      size: pool.size.toString(),
      unallocated: [...unallocated.keys()].slice(0, 50),
      unallocatedCount: unallocated.size,
    });
  }

  const content = buildContent(assigned, unallocated, pool.cidr);
  const removed = recordOf(plan.removed);
  if (sameContent(current, content)) {
    await retract(mesh, deps, asserted, current);
    let releasedNow = 0;
    if (current !== undefined && stillMembers.length > 0) {
      // The write that dropped them was not followed by the leave (a crash, a lost response):
      // finish it now.
      releasedNow = await leaveAll(stillMembers, mesh, current, deps);
      if (releasedNow > 0) {
        telemetry.metric(METRIC.releases, "Count", releasedNow);
        finder.freed();
      }
    }
    const wake = await waitingAndWake(
      mesh,
      deps,
      waiting(current),
      unallocated.size > 0,
      releasedNow,
    );
    return settled({
      ...outcome(mesh, "unchanged", current?.version, {}, {}, [...unallocated.keys()], attempt),
      wake,
    });
  }

  // Services that left, and renumbered services that found no address in the new range: the
  // item no longer lists them, so the mesh leaves their claims (recorded on the item first, so
  // a pass after a crash between the write and the leave finishes it).
  const leaving = [
    ...new Set([
      ...plan.removed.keys(),
      ...[...plan.outOfRange.keys()].filter((service) => unallocated.has(service)),
      ...stillMembers,
    ]),
  ];
  const item: VipItem = {
    mesh,
    version,
    vips: content.vips,
    cidr: content.cidr,
    updatedAt: new Date(deps.now()).toISOString(),
    ...(unallocated.size > 0 ? { unallocated: content.unallocated } : {}),
    incarnation,
    renumberings,
    ...(leaving.length > 0 ? { leaving } : {}),
  };
  let bytes: number;
  try {
    bytes = await vipItems.put(item, current);
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
    return settled(
      outcome(mesh, "unchanged", current?.version, {}, {}, [...unallocated.keys()], attempt),
    );
  }
  telemetry.metric(METRIC.meshWrites, "Count", 1);
  telemetry.metric(METRIC.itemBytes, "Bytes", bytes);

  const released = await leaveAll(leaving, mesh, item, deps);
  if (released > 0) finder.freed();
  await retract(mesh, deps, asserted, item);
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
  const wake = await waitingAndWake(mesh, deps, waiting(current), unallocated.size > 0, released);
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
    ...(Object.keys(renumbered).length > 0 ? { renumbered } : {}),
  };
  // With no quarantine, addresses released just now can serve the unallocated right away.
  const freedForWaiting = released > 0 && unallocated.size > 0 && deps.quarantineSeconds === 0;
  const fresh = await inputsStill(mesh, deps, true, services);
  return { outcome: written, settled: fresh && !freedForWaiting };
}

/**
 * Deletes a deleted mesh's item. A failed condition with no item left is a delete that landed
 * (this pass's, whose response was lost and whose retry by the SDK found the item gone, or a
 * concurrent pass's): the pass goes on to leave the item's services, which are conditional on
 * the item's incarnation and version and harmless if already done. Without this, a lost
 * response left every membership of the mesh behind for good.
 */
async function deleteItem(vipItems: VipItemStore, current: VipItem): Promise<void> {
  try {
    await vipItems.delete(current.mesh, current);
  } catch (error) {
    if (!(error instanceof VersionConflictError)) throw error;
    if ((await vipItems.get(current.mesh)) !== undefined) throw error;
  }
}

function waiting(item: VipItem | undefined): boolean {
  return Object.keys(item?.unallocated ?? {}).length > 0;
}

/**
 * Keeps the claims' list of meshes that wait for an address (their items list unallocated
 * services), and, when this pass freed addresses with no quarantine to wait for, returns the
 * other waiting meshes: the batch reconciles them again now (invariant 10: nothing stays
 * unallocated while an address is free). Addresses freed by a quarantine running out are
 * found by the next pass of the mesh.
 */
async function waitingAndWake(
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

/** Persists a finder's cursor and reports the range's use. */
export async function flushFinder(
  finder: AddressFinder,
  deps: Pick<ReconcileDeps, "pool" | "telemetry">,
): Promise<void> {
  const claimCount = await finder.flush();
  if (claimCount !== undefined && deps.pool.size > 0n) {
    const percent = Number((BigInt(claimCount) * 1_000_000n) / deps.pool.size) / 10_000;
    deps.telemetry.metric(METRIC.poolUsedPercent, "Percent", percent);
  }
}

function settled(result: MeshOutcome): Attempt {
  return { outcome: result, settled: true };
}

function outcome(
  mesh: string,
  action: MeshAction,
  version: number | undefined,
  added: Record<string, string>,
  removed: Record<string, string>,
  unallocated: string[],
  attempts: number,
): MeshOutcome {
  return { mesh, action, version, added, removed, unallocated, attempts };
}
