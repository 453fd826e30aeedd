import { contributorId } from "../../domain/contributions.ts";
import { alignWithClaims, claimsMovedSince, exhaustedReason, planMesh } from "../../domain/plan.ts";
import type { VipPool } from "../../domain/pool.ts";
import { own } from "../../domain/records.ts";
import type { VipItem } from "../../domain/types.ts";
import type {
  AddressClaim,
  ClaimsPort,
  LeaveRequest,
  MembershipRequest,
  PoolPort,
  ReleaseRequest,
} from "../../store/ports.ts";
import { type IndexDrift, repairIndexDrift } from "../membership-index/rebuild.ts";
import type { AddressFinder } from "../pass/address-finder.ts";
import { fenceItem, type PassBudget } from "../pass/deps.ts";
import { createInvocation, type Invocation } from "../pass/invocation.ts";
import { joinMesh, type LeaveOutcome, leaveMesh } from "../pass/memberships.ts";
import { reconcileMesh } from "../pass/reconcile-mesh.ts";
import {
  BatchIngresses,
  listedServices,
  type ServiceSetView,
  tablesView,
} from "../pass/service-set-view.ts";
import { METRIC } from "../telemetry-names.ts";
import { repairsOf } from "./repairs.ts";
import type { Repair, SweepPorts, SweepSettings } from "./types.ts";

/** What a pass of the sweep changed (or, dry, would change), and the meshes it woke. */
export interface PassRepairs {
  readonly repairs: readonly Repair[];
  readonly wake: readonly string[];
}

/**
 * Every change the sweep makes goes through a corrector: {@link LiveCorrector} makes it (with
 * the conditions of the event path), {@link DryCorrector} (a dry run) only says it would
 * (each write "succeeds"; nothing is read beyond what the detection reads).
 */
export interface Corrector {
  /** Claims released by this invocation's corrections (their addresses go into quarantine). */
  readonly freed: number;
  /** Orphaned addresses dropped by this invocation (free at once). */
  readonly dropped: number;
  /** Records a membership a listed service's claim lacks. */
  join(request: MembershipRequest): Promise<boolean>;
  /** Starts the quarantine of a claim no mesh uses. */
  release(request: ReleaseRequest): Promise<boolean>;
  /** Removes a membership no live item asserts (releasing the claim if it was the last). */
  leave(request: LeaveRequest & { readonly nowMs: number }): Promise<LeaveOutcome>;
  dropOrphanAddress(address: AddressClaim): Promise<boolean>;
  /**
   * Moves the item past version `past` (content unchanged) so a membership asserted for a
   * version never written can be left; undefined when the item moved on meanwhile. `items`
   * is the claims audit's copy of the items, kept up to date.
   */
  fence(
    item: VipItem,
    past: number,
    items: Map<string, VipItem | undefined>,
  ): Promise<VipItem | undefined>;
  setCounter(cidr: string, expected: number, claimed: number): Promise<boolean>;
  /**
   * Repairs a mesh's index drift; returns what was confirmed. `reported`: dataplanes whose
   * drift this run reported already (a dry run reports an ingress's drift in one mesh only).
   */
  repairIndex(
    mesh: string,
    drift: readonly IndexDrift[],
    reported: ReadonlySet<string>,
  ): Promise<IndexDrift[]>;
  /** A pass over the mesh's whole service set, read through `view`. */
  passMesh(mesh: string, view: ServiceSetView): Promise<PassRepairs>;
  /**
   * The pass of a woken mesh (waiting for an address a pass freed): `view` absent reads the
   * tables with the invocation's read of the ingresses; `finder` absent: the invocation's.
   */
  passWoken(
    mesh: string,
    view: ServiceSetView | undefined,
    finder: AddressFinder | undefined,
  ): Promise<PassRepairs>;
  /**
   * Runs `passes` with an address finder of their own (the invocation's may have tried, and
   * lost, the very addresses they wait for), then persists its cursor. Dry: runs nothing.
   */
  withOwnFinder(passes: (finder: AddressFinder) => Promise<void>): Promise<void>;
  /** The pass of a mesh that no longer exists (its item is removed), and the meshes it woke. */
  passDeletedMesh(mesh: string): Promise<PassRepairs>;
  /** Tells the telemetry of a correction made (`expected`: not counted for the alarm). */
  announce(repair: Repair, fields: Record<string, unknown>, expected: boolean): void;
  /** Persists the invocation's address cursor (claims made so far are counted). */
  finish(): Promise<void>;
}

export class LiveCorrector implements Corrector {
  freed = 0;
  dropped = 0;

  private readonly invocation: Invocation;

  constructor(
    private readonly ports: SweepPorts,
    private readonly settings: SweepSettings & { readonly budget?: PassBudget },
  ) {
    this.invocation = createInvocation(ports, settings);
  }

  async join(request: MembershipRequest): Promise<boolean> {
    return await joinMesh(this.ports.claims, request);
  }

  async release(request: ReleaseRequest): Promise<boolean> {
    const released = await this.ports.claims.release(request);
    if (released) this.freed++;
    return released;
  }

  async leave(request: LeaveRequest & { readonly nowMs: number }): Promise<LeaveOutcome> {
    const outcome = await leaveMesh(this.ports.claims, request);
    if (outcome === "released") this.freed++;
    return outcome;
  }

  async dropOrphanAddress(address: AddressClaim): Promise<boolean> {
    const dropped = await this.ports.claims.dropOrphanAddress(address);
    if (dropped) this.dropped++;
    return dropped;
  }

  async fence(
    item: VipItem,
    past: number,
    items: Map<string, VipItem | undefined>,
  ): Promise<VipItem | undefined> {
    const fenced = await fenceItem(this.ports.vipItems, item, past, this.invocation.deps.now());
    // Moved on: the next cycle decides on the new item.
    if (fenced === undefined) items.delete(item.mesh);
    else items.set(item.mesh, fenced);
    return fenced;
  }

  async setCounter(cidr: string, expected: number, claimed: number): Promise<boolean> {
    return await this.ports.claims.setCounter(cidr, expected, claimed);
  }

  async repairIndex(mesh: string, drift: readonly IndexDrift[]): Promise<IndexDrift[]> {
    return await repairIndexDrift(mesh, drift, this.ports.source, this.ports.index);
  }

  async passMesh(mesh: string, view: ServiceSetView): Promise<PassRepairs> {
    const outcome = await reconcileMesh(mesh, { ...this.invocation.deps, view });
    return { repairs: repairsOf(mesh, outcome), wake: outcome.wake ?? [] };
  }

  async passWoken(
    mesh: string,
    view: ServiceSetView | undefined,
    finder: AddressFinder | undefined,
  ): Promise<PassRepairs> {
    const outcome = await reconcileMesh(mesh, {
      ...this.invocation.deps,
      ...(finder !== undefined ? { addresses: finder } : {}),
      ...(view !== undefined ? { view } : {}),
    });
    return { repairs: repairsOf(mesh, outcome), wake: outcome.wake ?? [] };
  }

  async withOwnFinder(passes: (finder: AddressFinder) => Promise<void>): Promise<void> {
    const own = createInvocation(this.ports, this.settings);
    await passes(own.deps.addresses);
    await own.finish();
  }

  async passDeletedMesh(mesh: string): Promise<PassRepairs> {
    const outcome = await reconcileMesh(mesh, this.invocation.deps);
    return { repairs: repairsOf(mesh, outcome), wake: outcome.wake ?? [] };
  }

  announce(repair: Repair, fields: Record<string, unknown>, expected: boolean): void {
    const telemetry = this.ports.telemetry;
    telemetry.repair(repair.kind, fields, expected);
    if (repair.inFlight === true) telemetry.metric(METRIC.sweepInFlight, "Count", 1);
  }

  async finish(): Promise<void> {
    await this.invocation.finish();
  }
}

export class DryCorrector implements Corrector {
  readonly freed = 0;
  readonly dropped = 0;
  private readonly allocation: DryAllocation;
  private readonly tables: ServiceSetView;

  constructor(
    private readonly ports: SweepPorts,
    private readonly pool: VipPool,
  ) {
    this.allocation = new DryAllocation(ports.claims, pool);
    this.tables = tablesView(ports.source, new BatchIngresses(ports.source));
  }

  async join(): Promise<boolean> {
    return true;
  }

  async release(): Promise<boolean> {
    return true;
  }

  async leave(): Promise<LeaveOutcome> {
    return "left";
  }

  async dropOrphanAddress(): Promise<boolean> {
    return true;
  }

  async fence(item: VipItem, past: number): Promise<VipItem | undefined> {
    return { ...item, version: past };
  }

  async setCounter(): Promise<boolean> {
    return true;
  }

  async repairIndex(
    _mesh: string,
    drift: readonly IndexDrift[],
    reported: ReadonlySet<string>,
  ): Promise<IndexDrift[]> {
    // Nothing is repaired, so a dataplane contributing to several meshes (an ingress) would
    // show up in each: it is reported once.
    return drift.filter((found) => !reported.has(contributorId(found.dataplane)));
  }

  /**
   * What a pass would change, from the item and the service set the tables give (what the index
   * holds once the run repairs it; a dry run repairs nothing, so the index may still lack it),
   * planned as the pass plans it: `planMesh`, then `alignWithClaims` against the services'
   * claims after renumberings (a listed VIP that is not its claim's is renumbered), with the
   * VIP each service needing one would get (its claim's, a fresh one) or that it would get none
   * (decision 145).
   */
  async passMesh(mesh: string): Promise<PassRepairs> {
    const item = await this.ports.vipItems.get(mesh);
    const wanted = (await this.tables.read(mesh, item, 1)).services;
    const first = planMesh(item, wanted, this.pool);
    const verify =
      item !== undefined && claimsMovedSince(item, await this.ports.claims.getRenumberings());
    const claims = verify ? await this.ports.claims.getServices([...first.keep.keys()]) : new Map();
    const plan = alignWithClaims(
      first,
      new Map([...claims].map(([service, claim]) => [service, claim.vip])),
    );
    const predictions = await this.allocation.predict(plan.needed);
    if (item === undefined) {
      const unallocated = [...predictions]
        .filter(([, prediction]) => "unallocated" in prediction)
        .map(([service]) => service);
      const detail = {
        services: wanted.length,
        ...(unallocated.length > 0 ? { unallocated } : {}),
      };
      return { repairs: [{ kind: "item-missing", mesh, detail }], wake: [] };
    }
    const repairs: Repair[] = [];
    for (const service of plan.needed) {
      const prediction = predictions.get(service);
      const from = plan.outOfRange.get(service);
      if (from === undefined) {
        // New to the item, or listed as unallocated and now given an address.
        const waiting = own(item.unallocated, service) !== undefined;
        if (waiting && prediction !== undefined && "unallocated" in prediction) continue;
        repairs.push({
          kind: "item-services-added",
          mesh,
          service,
          detail: predictionDetail(prediction),
        });
        continue;
      }
      const to = prediction !== undefined && "vip" in prediction ? { to: prediction.vip } : {};
      const none =
        prediction !== undefined && "unallocated" in prediction
          ? { unallocated: prediction.unallocated }
          : {};
      repairs.push({ kind: "item-renumbered", mesh, service, detail: { from, ...to, ...none } });
    }
    const want = new Set(wanted);
    for (const service of listedServices(item)) {
      if (!want.has(service)) repairs.push({ kind: "item-services-removed", mesh, service });
    }
    return { repairs, wake: [] };
  }

  async passWoken(): Promise<PassRepairs> {
    return { repairs: [], wake: [] };
  }

  async withOwnFinder(): Promise<void> {}

  async passDeletedMesh(mesh: string): Promise<PassRepairs> {
    return { repairs: [{ kind: "item-of-deleted-mesh", mesh }], wake: [] };
  }

  announce(): void {}

  async finish(): Promise<void> {}
}

/** What a dry run predicts for a service that needs a VIP in a mesh. */
export type Prediction =
  /** The VIP its claim already holds (the same in every mesh). */
  | { readonly vip: string }
  /** A fresh address of the range. */
  | { readonly fresh: true }
  /** None: the range has no address left (the item's `unallocated` reason). */
  | { readonly unallocated: string };

/**
 * A dry run's view of the range: which services needing a VIP would get one, so that
 * `reconcile --dry-run` predicts what the pass would give, and what it could not (decision
 * 145). A service with an in-range claim keeps its VIP; the others take fresh addresses while
 * the range has unclaimed ones (its size minus its claim counter, read once; quarantined
 * addresses count as claimed, as the finder sees them until their quarantine is over), in
 * sorted order as a pass takes them, across the meshes of the run.
 */
export class DryAllocation {
  private free: bigint | undefined;

  constructor(
    private readonly claims: ClaimsPort & PoolPort,
    private readonly pool: VipPool,
  ) {}

  async predict(services: readonly string[]): Promise<Map<string, Prediction>> {
    const predictions = new Map<string, Prediction>();
    if (services.length === 0) return predictions;
    const sorted = [...services].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const claims = await this.claims.getServices(sorted, false);
    this.free ??= this.pool.size - BigInt(await this.claims.readCounter(this.pool.cidr));
    for (const service of sorted) {
      const vip = claims.get(service)?.vip;
      const inRange = vip === undefined ? undefined : this.pool.canonical(vip);
      if (inRange !== undefined) predictions.set(service, { vip: inRange });
      else if (this.free > 0n) {
        this.free--;
        predictions.set(service, { fresh: true });
      } else predictions.set(service, { unallocated: exhaustedReason(this.pool) });
    }
    return predictions;
  }
}

/** A prediction as a repair's detail: `{ vip }`, nothing (a fresh VIP), or `{ unallocated }`. */
export function predictionDetail(prediction: Prediction | undefined): Record<string, unknown> {
  if (prediction === undefined || "fresh" in prediction) return {};
  return "vip" in prediction ? { vip: prediction.vip } : { unallocated: prediction.unallocated };
}
