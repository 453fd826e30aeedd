import { dataplaneId } from "../domain/contributions.ts";
import { VersionConflictError } from "../domain/errors.ts";
import type { VipPool } from "../domain/pool.ts";
import { own } from "../domain/records.ts";
import type { VipItem } from "../domain/types.ts";
import type {
  AddressClaim,
  ClaimStore,
  MembershipIndex,
  MeshSource,
  Page,
  ServiceClaim,
  SweepState,
  VipItemStore,
} from "../store/ports.ts";
import type { ServiceSetMode } from "./batch/process-batch.ts";
import type { AddressFinder } from "./pass/address-finder.ts";
import { BatchIngresses } from "./pass/batch-ingresses.ts";
import { createInvocation, type Invocation } from "./pass/invocation.ts";
import { joinMesh, leaveMesh } from "./pass/memberships.ts";
import type { MeshOutcome } from "./pass/outcome.ts";
import { reconcileMesh } from "./pass/reconcile-mesh.ts";
import { indexView, listedServices, tablesView } from "./pass/service-set-view.ts";
import { passWoken } from "./pass/waiting.ts";
import { type IndexDrift, meshIndexDrift, repairIndexDrift } from "./repair-index.ts";
import type { Telemetry } from "./telemetry.ts";
import { METRIC } from "./telemetry-names.ts";

/** What the sweep corrects, one kind per way the event path can have missed something. */
export type RepairKind =
  /** A dataplane's index entries or record disagreed with the dataplanes table. */
  | "index-drift"
  /** An existing mesh had no VIP item. */
  | "item-missing"
  /** The item lacked a service the mesh has. */
  | "item-services-added"
  /** The item listed a service the mesh no longer has. */
  | "item-services-removed"
  /** The item listed a VIP outside VIP_CIDR. */
  | "item-renumbered"
  /** A VIP item of a mesh that no longer exists. */
  | "item-of-deleted-mesh"
  /** A listed service's claim did not record the mesh's membership. */
  | "membership-missing"
  /** A claim recorded a membership that no live item asserts. */
  | "membership-leak"
  /** A claim that no mesh uses was not released (its quarantine never started). */
  | "claim-unreleased"
  /** An address claim whose owner has no service claim (no reclaim could ever free it). */
  | "address-orphaned"
  /** The range's claim counter disagreed with the address claims. */
  | "pool-counter";

export interface Repair {
  readonly kind: RepairKind;
  readonly mesh?: string;
  readonly service?: string;
  readonly detail?: Record<string, unknown>;
  /**
   * Made by the pass of a mesh whose first look was clean: what it changed appeared after that
   * look, so the event path had it in flight (counted as `SweepInFlight`, not for the alarm).
   */
  readonly inFlight?: boolean;
}

export interface SweepPorts {
  readonly source: MeshSource;
  readonly vipItems: VipItemStore;
  readonly claims: ClaimStore;
  readonly index: MembershipIndex;
  readonly telemetry: Telemetry;
}

export interface SweepSettings {
  readonly pool: VipPool;
  readonly quarantineSeconds: number;
  readonly maxAttempts: number;
  /** Where mesh passes get service sets (as the event path); default `index`. */
  readonly serviceSet?: ServiceSetMode;
  /**
   * How the reads that look for something to correct are made: `eventual` (half the price of a
   * strongly consistent read; what they find is read again, strongly, before it is corrected)
   * or `strong`. @default "eventual"
   */
  readonly detection?: "eventual" | "strong";
  readonly now: () => number;
  readonly newId: () => string;
  readonly sleep: (ms: number) => Promise<void>;
  readonly random: () => number;
}

export interface SweepOptions {
  /** Epoch ms by which the sweep stops and saves its position; absent: run to the cycle's end. */
  readonly deadline?: number;
  /** Report what would be corrected and change nothing (the position is not stored either). */
  readonly dryRun?: boolean;
  /** Only these meshes (their items, index and memberships); the position is not stored. */
  readonly meshes?: readonly string[];
  /** Keep the position in the claims table, to continue in the next invocation (Lambda). */
  readonly stored?: boolean;
  /** Start a new cycle even if the stored one is unfinished. */
  readonly restart?: boolean;
  /** A new cycle after a deployment onto existing tables: its corrections are expected. */
  readonly backfill?: boolean;
  /**
   * The event path's normal latency (decision 071). A mesh where a first, read-only look finds
   * drift (index, item, or an item of a deleted mesh) is looked at again once this long has
   * passed, and only what is still wrong then is corrected and counted as a repair; drift gone
   * by then was in flight (`SweepInFlight`). 0 or absent: corrected at once (the CLI, tests).
   * Not used by a backfill or a dry run.
   */
  readonly graceMs?: number;
  /** Items per page of each table. */
  readonly pageSize?: number;
  /** Each correction (made, or with `dryRun` found), as it happens. */
  readonly onRepair?: (repair: Repair) => void;
  /** After each mesh of the meshes phase, with its corrections. */
  readonly onMesh?: (mesh: string, repairs: readonly Repair[]) => void;
}

export interface SweepResult {
  readonly cycle: string;
  /** The whole cycle is done (every phase reached its end). */
  readonly finished: boolean;
  /** Why it stopped early: out of time, or another sweep holds the stored position. */
  readonly stopped?: "deadline" | "superseded";
  /** Meshes examined by this call. */
  readonly meshes: number;
  /** Corrections made (or, with `dryRun`, found) by this call. */
  readonly repairs: readonly Repair[];
}

/** Time kept back from the deadline to save the position. */
const SAFETY_MS = 5_000;
/** Meshes waiting for their second look before they are looked at (bounds the time needed). */
const MAX_PENDING = 25;
/** Time kept back, besides the grace, for the second looks of the pending meshes. */
const SECOND_LOOK_MS = 5_000;

/** A mesh (or, in the claims phase, a service) whose first look found drift. */
interface Pending {
  readonly phase: "meshes" | "items" | "claims";
  /** The mesh, or the service of a claim. */
  readonly name: string;
  /** Epoch ms of the first look. */
  readonly at: number;
  readonly found: string;
  /** Meshes phase: the index drift the first look found, with each record's version then. */
  readonly drift?: readonly IndexDrift[];
  /** Meshes phase: the item disagreed with the index; its version then (null: no item). */
  readonly item?: { readonly version: number | null; readonly incarnation: string | null };
}

/** What a first look at a mesh found, or undefined when it looks clean. */
type FirstLook = Omit<Pending, "phase" | "name" | "at"> | undefined;

/**
 * The repair sweep: whatever the event path missed (records lost to the failure destination,
 * a function killed mid-pass, items written before the stream existed), a cycle brings every
 * table back to the contract. Three phases, each paged and resumable:
 * 1. `meshes` (the meshes table): each mesh's part of the membership index is compared with the
 *    dataplanes table and repaired, then the mesh gets an ordinary pass (same claims and version
 *    conditions as the event path), then the claims of the services its item lists are checked
 *    for its membership;
 * 2. `items` (the vips table): items of meshes that no longer exist are removed (a pass);
 * 3. `claims` (the claims table): memberships that no live item asserts are removed, claims no
 *    mesh uses are released, and the range's claim counter is checked against the addresses.
 * Every correction is logged and counted (`SweepRepairs`, by `kind`); a clean cycle reports none.
 * It never takes a VIP from a live service: a membership is removed only with the conditions of
 * a leave, and one newer than its item only after the item's version has been moved past it.
 */
export async function sweep(
  ports: SweepPorts,
  settings: SweepSettings,
  options: SweepOptions = {},
): Promise<SweepResult> {
  return await new Sweep(ports, settings, options).run();
}

class Sweep {
  private readonly repairs: Repair[] = [];
  private readonly invocation: Invocation;
  private readonly deps: Invocation["deps"];
  private readonly only: ReadonlySet<string> | undefined;
  private readonly dry: boolean;
  private readonly stored: boolean;
  private readonly pageSize: number;
  /** Strongly consistent detection reads. */
  private readonly strong: boolean;
  /** The ingresses as the detection reads see them (read once per invocation). */
  private readonly detected: BatchIngresses;
  private state: SweepState;
  private storedVersion: number | undefined;
  private examined = 0;
  /** Claims the claims phase released in this invocation. */
  private freed = 0;
  /** Orphaned addresses the claims phase dropped in this invocation (free at once). */
  private dropped = 0;
  /** Meshes a pass of this sweep woke (it freed addresses they wait for). */
  private readonly woken = new Set<string>();
  /** Dataplanes whose drift this run reported. */
  private readonly reported = new Set<string>();
  /** The claim counter's difference that the previous cycle found (see checkCounter). */
  private previousDelta: number | undefined;
  /** Items read in the claims phase (decisions on a stale one are still safe: all conditional). */
  private readonly items = new Map<string, VipItem | undefined>();
  /** Claims phase: service -> the meshes whose item lists it (read once per invocation). */
  private listedBy: Map<string, string[]> | undefined;
  /** Meshes whose first look found drift, in the order found (decision 071). */
  private readonly pending: Pending[] = [];
  /** The grace before a second look; 0: no first look, corrections at once. */
  private readonly graceMs: number;

  constructor(
    private readonly ports: SweepPorts,
    private readonly settings: SweepSettings,
    private readonly options: SweepOptions,
  ) {
    this.only = options.meshes === undefined ? undefined : new Set(options.meshes);
    this.dry = options.dryRun === true;
    this.stored = options.stored === true && !this.dry && this.only === undefined;
    this.pageSize = options.pageSize ?? 100;
    this.strong = settings.detection === "strong";
    this.graceMs = this.dry || options.backfill === true ? 0 : Math.max(0, options.graceMs ?? 0);
    this.detected = new BatchIngresses(ports.source, this.strong);
    this.invocation = createInvocation(ports, settings);
    this.deps = this.invocation.deps;
    this.state = this.freshState();
  }

  async run(): Promise<SweepResult> {
    if (this.stored) {
      const saved = await this.ports.claims.getSweepState();
      this.storedVersion = saved?.version;
      const restart = this.options.restart === true || this.options.backfill === true;
      if (saved !== undefined && saved.phase !== "done" && !restart) {
        this.state = saved;
      }
      this.previousDelta = saved?.phase === "done" ? saved.counterDelta : saved?.previousDelta;
      if (this.previousDelta !== undefined) this.advance({ previousDelta: this.previousDelta });
      // Taking the position is itself conditional: of two sweeps, one goes on.
      if (!(await this.save())) return this.result(false, "superseded");
    }
    let stopped: SweepResult["stopped"];
    try {
      while (this.state.phase !== "done") {
        if (this.outOfTime()) {
          stopped = "deadline";
          break;
        }
        const more = await this.step();
        if (!(await this.save())) {
          stopped = "superseded";
          break;
        }
        if (!more) {
          stopped = "deadline";
          break;
        }
      }
    } finally {
      if (!this.dry) await this.invocation.finish();
    }
    const finished = this.state.phase === "done";
    if (finished) {
      this.ports.telemetry.metric(METRIC.sweepCycles, "Count", 1);
      this.ports.telemetry.info("sweep cycle finished", {
        cycle: this.state.cycle,
        meshes: this.state.meshes,
        repairs: this.state.repairs,
        seconds: Math.round((this.settings.now() - this.state.startedAt) / 1000),
      });
    }
    if (this.examined > 0) this.ports.telemetry.metric(METRIC.sweepMeshes, "Count", this.examined);
    return this.result(finished, stopped);
  }

  private result(finished: boolean, stopped: SweepResult["stopped"]): SweepResult {
    return {
      cycle: this.state.cycle,
      finished,
      ...(stopped !== undefined && !finished ? { stopped } : {}),
      meshes: this.examined,
      repairs: this.repairs,
    };
  }

  private freshState(): SweepState {
    return {
      cycle: this.settings.newId(),
      startedAt: this.settings.now(),
      phase: "meshes",
      after: undefined,
      meshes: 0,
      repairs: 0,
      addressesInRange: 0,
      counterAtStart: undefined,
      ...(this.options.backfill === true ? { backfill: true } : {}),
      version: 0,
    };
  }

  private async save(): Promise<boolean> {
    if (!this.stored) return true;
    const next: SweepState = { ...this.state, version: (this.storedVersion ?? 0) + 1 };
    if (!(await this.ports.claims.putSweepState(next, this.storedVersion))) return false;
    this.storedVersion = next.version;
    this.state = next;
    return true;
  }

  private outOfTime(reserveMs = 0): boolean {
    const deadline = this.options.deadline;
    return deadline !== undefined && this.settings.now() > deadline - SAFETY_MS - reserveMs;
  }

  /** Whether a first look comes before corrections (a stored, scheduled cycle; not a backfill). */
  private deferring(): boolean {
    return this.graceMs > 0 && this.state.backfill !== true;
  }

  /** What a new first look must leave time for: the grace and the second looks after it. */
  private reserve(): number {
    return this.deferring() ? this.graceMs + SECOND_LOOK_MS : 0;
  }

  /**
   * The second look at every pending mesh, once the grace since its first look has passed:
   * the ordinary correction (strongly consistent re-reads, conditional writes), counted as
   * repairs. A mesh where it corrects nothing was in flight.
   */
  private async secondLooks(): Promise<void> {
    while (this.pending.length > 0) {
      const next = this.pending[0] as Pending;
      const wait = next.at + this.graceMs - this.settings.now();
      if (wait > 0) await this.settings.sleep(wait);
      this.pending.shift();
      const before = this.repairs.length;
      if (next.phase === "meshes") {
        const found = await this.secondLookMesh(next);
        this.options.onMesh?.(next.name, found);
      } else if (next.phase === "items") await this.correctItem(next.name);
      else await this.secondLookClaim(next.name);
      if (this.repairs.slice(before).every((repair) => repair.inFlight === true)) {
        this.ports.telemetry.metric(METRIC.sweepInFlight, "Count", 1);
        this.ports.telemetry.info("sweep: drift corrected by the event path meanwhile", {
          [next.phase === "claims" ? "service" : "mesh"]: next.name,
          phase: next.phase,
          found: next.found,
          seconds: Math.round((this.settings.now() - next.at) / 1000),
          cycle: this.state.cycle,
        });
      }
    }
  }

  /** One page of the current phase; false when it stopped for time in the middle of it. */
  private async step(): Promise<boolean> {
    const { phase, after } = this.state;
    if (phase === "meshes") {
      const page = await this.meshesPage(after, (p) =>
        this.ports.source.meshPage(p, this.pageSize, this.strong),
      );
      for (const mesh of page.items) {
        if (this.outOfTime(this.reserve())) {
          await this.secondLooks();
          return false;
        }
        if (this.pending.length >= MAX_PENDING) await this.secondLooks();
        const found = await this.sweepMesh(mesh);
        if (found !== undefined) this.options.onMesh?.(mesh, found);
        this.examined++;
        this.advance({ after: mesh, meshes: this.state.meshes + 1 });
      }
      // Before the position moves past the page: every mesh of it has had its last look.
      await this.secondLooks();
      await this.passWoken();
      if (page.next === undefined) this.advance({ phase: "items", after: undefined });
      return true;
    }
    if (phase === "items") {
      const page = await this.meshesPage(after, (p) =>
        this.ports.vipItems.meshPage(p, this.pageSize, this.strong),
      );
      for (const mesh of page.items) {
        if (this.outOfTime(this.reserve())) {
          await this.secondLooks();
          return false;
        }
        if (this.pending.length >= MAX_PENDING) await this.secondLooks();
        await this.sweepItem(mesh);
        this.advance({ after: mesh });
      }
      await this.secondLooks();
      if (page.next === undefined) this.advance({ phase: "claims", after: undefined });
      return true;
    }
    if (phase === "claims") {
      if (after === undefined && this.state.counterAtStart === undefined) {
        // Claims this sweep made are counted before the counter is compared with the scan.
        if (!this.dry) await this.invocation.finish();
        const counter = await this.ports.claims.readCounter(this.settings.pool.cidr);
        this.advance({ counterAtStart: counter, addressesInRange: 0 });
      }
      await this.loadItems();
      const page = await this.ports.claims.scan(after, this.pageSize, this.strong);
      for (const item of page.items) {
        if (this.outOfTime(this.reserve())) {
          await this.secondLooks();
          return false;
        }
        if (this.pending.length >= MAX_PENDING) await this.secondLooks();
        if ("service" in item) await this.sweepClaim(item.service);
        else if (!(await this.sweepAddress(item.address))) {
          // Dropped: not counted.
        } else if (this.settings.pool.canonical(item.address.vip) !== undefined) {
          this.advance({ addressesInRange: this.state.addressesInRange + 1 });
        }
        this.advance({ after: item.key });
      }
      await this.secondLooks();
      if (page.next !== undefined) this.advance({ after: page.next });
      else {
        // The counter first: the passes woken next add their own claims to it.
        await this.checkCounter();
        await this.wakeWaiting();
        this.advance({ phase: "done", after: undefined, finishedAt: this.settings.now() });
      }
      return true;
    }
    return true;
  }

  /** A page of mesh names: from the table, or (with `meshes`) the given ones, all at once. */
  private async meshesPage(
    after: string | undefined,
    read: (after: string | undefined) => Promise<Page<string>>,
  ): Promise<Page<string>> {
    if (this.only === undefined) return await read(after);
    if (after !== undefined) return { items: [], next: undefined };
    return { items: [...this.only].sort(), next: undefined };
  }

  private advance(change: Partial<SweepState>): void {
    this.state = { ...this.state, ...change };
  }

  private record(found: Repair): void {
    const repair: Repair = this.inFlight ? { ...found, inFlight: true } : found;
    this.repairs.push(repair);
    this.advance({ repairs: this.state.repairs + 1 });
    this.options.onRepair?.(repair);
    if (!this.dry) {
      const backfill = this.state.backfill === true;
      this.ports.telemetry.repair(
        repair.kind,
        {
          ...(repair.mesh !== undefined ? { mesh: repair.mesh } : {}),
          ...(repair.service !== undefined ? { service: repair.service } : {}),
          ...(repair.detail ?? {}),
          cycle: this.state.cycle,
          ...(backfill ? { backfill: true } : {}),
          ...(this.inFlight ? { inFlight: true } : {}),
        },
        backfill || this.inFlight,
      );
      if (this.inFlight) this.ports.telemetry.metric(METRIC.sweepInFlight, "Count", 1);
    }
  }

  /** While true, corrections are recorded as the event path's work in flight. */
  private inFlight = false;

  // --- phase 1: each mesh ----------------------------------------------------------------------

  /**
   * One mesh of the meshes phase. With a grace (decision 071), a read-only first look comes
   * first: drift found is left for the second look (undefined: pending); a clean mesh gets its
   * pass at once, and whatever that pass still changes appeared after the look (in flight).
   */
  private async sweepMesh(mesh: string): Promise<Repair[] | undefined> {
    const useIndex = (this.settings.serviceSet ?? "index") === "index";
    if (!this.deferring() || !useIndex) return await this.correctMesh(mesh, false);
    const look = await this.firstLook(mesh);
    if (look !== undefined) {
      this.pending.push({ ...look, phase: "meshes", name: mesh, at: this.settings.now() });
      return undefined;
    }
    return await this.correctMesh(mesh, true);
  }

  /**
   * The second look at a mesh. Index drift is a fault only where the dataplane's record has not
   * moved since the first look (the event path did not touch it in a whole grace) and the table
   * still disagrees; drift of records that moved, or that is new, is the event path's work in
   * flight and left to it. The pass then counts as a fault after a confirmed index repair, or
   * when the first look found the item wrong and the item has not moved since; otherwise what
   * it changes is in flight.
   */
  private async secondLookMesh(first: Pending): Promise<Repair[]> {
    const mesh = first.name;
    const before = this.repairs.length;
    const { drift, issues } = await meshIndexDrift(
      mesh,
      this.ports.source,
      this.detected,
      this.ports.index,
      true,
    );
    for (const issue of issues) this.ports.telemetry.badInput(issue);
    const earlier = new Map(
      (first.drift ?? []).map((found) => [dataplaneId(found.dataplane), found.recordVersion]),
    );
    const persisted = drift.filter((found) => {
      const id = dataplaneId(found.dataplane);
      return earlier.has(id) && earlier.get(id) === found.recordVersion;
    });
    const confirmed = await repairIndexDrift(mesh, persisted, this.ports.source, this.ports.index);
    for (const found of confirmed) this.reported.add(dataplaneId(found.dataplane));
    for (const found of confirmed) {
      this.record({ kind: "index-drift", mesh, detail: driftDetail(found) });
    }
    let inFlight = confirmed.length === 0;
    if (inFlight && first.item !== undefined) {
      const item = await this.ports.vipItems.get(mesh);
      inFlight =
        (item?.version ?? null) !== first.item.version ||
        (item?.incarnation ?? null) !== first.item.incarnation;
    }
    this.inFlight = inFlight;
    try {
      await this.passMesh(mesh, true);
    } finally {
      this.inFlight = false;
    }
    return this.repairs.slice(before);
  }

  /**
   * Read-only: the mesh's index against the dataplanes table (eventually consistent, as the
   * sweep's detection), and its item against the index's service set and the range. What it
   * found, or undefined when the mesh looks clean. One GetItem more than a correction reads.
   */
  private async firstLook(mesh: string): Promise<FirstLook> {
    const { drift, issues, services } = await meshIndexDrift(
      mesh,
      this.ports.source,
      this.detected,
      this.ports.index,
      this.strong,
    );
    if (drift.length > 0) return { found: `index-drift: ${drift.length} dataplanes`, drift };
    for (const issue of issues) this.ports.telemetry.badInput(issue);
    const item = await this.ports.vipItems.get(mesh);
    const at = { version: item?.version ?? null, incarnation: item?.incarnation ?? null };
    if (item === undefined) return { found: "item-missing", item: at };
    const listed = new Set(listedServices(item));
    if (listed.size !== services.length || services.some((service) => !listed.has(service))) {
      return { found: "item-services", item: at };
    }
    for (const vip of Object.values(item.vips)) {
      if (this.settings.pool.canonical(vip) === undefined) {
        return { found: "item-renumbered", item: at };
      }
    }
    return undefined;
  }

  /** The mesh's correction: index drift (read again, strongly), then a pass. */
  private async correctMesh(mesh: string, inFlight: boolean): Promise<Repair[]> {
    const before = this.repairs.length;
    this.inFlight = inFlight;
    try {
      await this.correctMeshNow(mesh, inFlight);
    } finally {
      this.inFlight = false;
    }
    return this.repairs.slice(before);
  }

  private async correctMeshNow(mesh: string, afterCleanLook: boolean): Promise<void> {
    const useIndex = (this.settings.serviceSet ?? "index") === "index";
    // After a clean first look the index agreed with the table a moment ago: the pass alone.
    if (useIndex && !afterCleanLook) await this.sweepIndex(mesh);
    await this.passMesh(mesh, useIndex);
  }

  /** The mesh's pass over its whole service set (with `dryRun`, what it would change). */
  private async passMesh(mesh: string, useIndex: boolean): Promise<void> {
    if (this.dry) await this.previewItem(mesh, await this.ports.vipItems.get(mesh), useIndex);
    else {
      const outcome = await reconcileMesh(mesh, {
        ...this.deps,
        view: useIndex
          ? indexView(this.ports.index, "all")
          : tablesView(this.ports.source, new BatchIngresses(this.ports.source)),
      });
      this.itemRepairs(mesh, outcome);
      for (const other of outcome.wake ?? []) this.woken.add(other);
    }
  }

  private async sweepIndex(mesh: string): Promise<void> {
    const { drift, issues } = await meshIndexDrift(
      mesh,
      this.ports.source,
      this.detected,
      this.ports.index,
      this.strong,
    );
    for (const issue of issues) this.ports.telemetry.badInput(issue);
    // A dry run repairs nothing, so a dataplane contributing to several meshes (an ingress)
    // would show up in each: it is reported once.
    const confirmed = this.dry
      ? drift.filter((found) => !this.reported.has(dataplaneId(found.dataplane)))
      : await repairIndexDrift(mesh, drift, this.ports.source, this.ports.index);
    for (const found of confirmed) this.reported.add(dataplaneId(found.dataplane));
    for (const found of confirmed) {
      this.record({ kind: "index-drift", mesh, detail: driftDetail(found) });
    }
  }

  /** With `dryRun`: what a pass would change, from the service set and the item. */
  private async previewItem(mesh: string, item: VipItem | undefined, useIndex: boolean) {
    const view = useIndex
      ? indexView(this.ports.index, "all")
      : tablesView(this.ports.source, new BatchIngresses(this.ports.source));
    const wanted = (await view.read(mesh, item, 1)).services;
    if (item === undefined) {
      this.record({ kind: "item-missing", mesh, detail: { services: wanted.length } });
      return;
    }
    const listed = new Set(listedServices(item));
    const want = new Set(wanted);
    for (const service of wanted) {
      if (!listed.has(service)) this.record({ kind: "item-services-added", mesh, service });
    }
    for (const service of listed) {
      if (!want.has(service)) this.record({ kind: "item-services-removed", mesh, service });
    }
    for (const [service, vip] of Object.entries(item.vips)) {
      if (want.has(service) && this.settings.pool.canonical(vip) === undefined) {
        this.record({ kind: "item-renumbered", mesh, service, detail: { from: vip } });
      }
    }
  }

  private itemRepairs(mesh: string, outcome: MeshOutcome): void {
    if (outcome.action === "created") {
      this.record({
        kind: "item-missing",
        mesh,
        detail: { services: Object.keys(outcome.added).length, version: outcome.version },
      });
      return;
    }
    if (outcome.action === "deleted") {
      this.record({ kind: "item-of-deleted-mesh", mesh, detail: { version: outcome.version } });
      return;
    }
    if (outcome.action !== "updated") return;
    for (const [service, vip] of Object.entries(outcome.added)) {
      const old = own(outcome.renumbered, service);
      if (old !== undefined) {
        this.record({ kind: "item-renumbered", mesh, service, detail: { from: old, to: vip } });
      } else this.record({ kind: "item-services-added", mesh, service, detail: { vip } });
    }
    for (const [service, vip] of Object.entries(outcome.removed)) {
      this.record({ kind: "item-services-removed", mesh, service, detail: { vip } });
    }
  }

  private async checkListed(
    mesh: string,
    item: VipItem,
    service: string,
    vip: string,
    claim: ServiceClaim | undefined,
  ): Promise<void> {
    const held = claim?.meshes.get(mesh);
    if (held !== undefined && held.incarnation === item.incarnation) return;
    if (claim === undefined || claim.vip !== vip) {
      // Never seen in tests; reported, left to a pass (a sweep must not move a listed VIP).
      this.ports.telemetry.error("a listed VIP is not backed by its service's claim", {
        mesh,
        service,
        vip,
        claimVip: claim?.vip,
      });
      return;
    }
    const joined =
      this.dry ||
      (await joinMesh(this.ports.claims, {
        service,
        vip,
        mesh,
        membership: { incarnation: item.incarnation, version: item.version },
        resume: claim.releasedAt !== undefined,
      }));
    if (joined) {
      this.record({
        kind: "membership-missing",
        mesh,
        service,
        detail: { vip, found: held?.incarnation ?? null },
      });
    }
  }

  // --- phase 2: items of meshes that are gone --------------------------------------------------

  private async sweepItem(mesh: string): Promise<void> {
    if (this.deferring()) {
      // First look: a mesh deleted a moment ago may have its record still on the way.
      if (await this.ports.source.meshExists(mesh)) return;
      this.pending.push({ phase: "items", name: mesh, at: this.settings.now(), found: "deleted" });
      return;
    }
    await this.correctItem(mesh);
  }

  private async correctItem(mesh: string): Promise<void> {
    if (await this.ports.source.meshExists(mesh)) return;
    if (this.dry) {
      this.record({ kind: "item-of-deleted-mesh", mesh });
      return;
    }
    this.itemRepairs(mesh, await reconcileMesh(mesh, this.deps));
  }

  // --- phase 3: the claims ---------------------------------------------------------------------

  private async itemOf(mesh: string): Promise<VipItem | undefined> {
    if (!this.items.has(mesh)) this.items.set(mesh, await this.ports.vipItems.get(mesh));
    return this.items.get(mesh);
  }

  /**
   * Reads every item once (a Scan billed by size; with `meshes`, those items), so each claim
   * can be checked against the meshes that list its service without a read per service.
   */
  private async loadItems(): Promise<void> {
    if (this.listedBy !== undefined) return;
    const listedBy = new Map<string, string[]>();
    const add = (item: VipItem) => {
      this.items.set(item.mesh, item);
      for (const service of Object.keys(item.vips)) {
        const meshes = listedBy.get(service) ?? [];
        meshes.push(item.mesh);
        listedBy.set(service, meshes);
      }
    };
    if (this.only !== undefined) {
      for (const mesh of this.only) {
        const item = await this.ports.vipItems.get(mesh);
        if (item !== undefined) add(item);
        else this.items.set(mesh, undefined);
      }
    } else {
      let after: string | undefined;
      do {
        const page = await this.ports.vipItems.itemPage(after, this.pageSize, this.strong);
        for (const item of page.items) add(item);
        for (const mesh of page.malformed) {
          this.ports.telemetry.error("VIP item could not be decoded; its claims are not checked", {
            mesh,
          });
        }
        after = page.next;
      } while (after !== undefined);
    }
    this.listedBy = listedBy;
  }

  /** Whether a claim, as a detection read saw it, may need a correction. */
  private async suspicious(claim: ServiceClaim): Promise<boolean> {
    for (const mesh of this.listedBy?.get(claim.service) ?? []) {
      if (claim.meshes.get(mesh)?.incarnation !== this.items.get(mesh)?.incarnation) return true;
    }
    if (claim.meshes.size === 0) return claim.releasedAt === undefined;
    for (const [mesh, membership] of claim.meshes) {
      if (this.only !== undefined && !this.only.has(mesh)) continue;
      const item = await this.itemOf(mesh);
      const listed = own(item?.vips, claim.service) !== undefined;
      if (!listed || item?.incarnation !== membership.incarnation) return true;
    }
    return false;
  }

  private async sweepClaim(seen: ServiceClaim): Promise<void> {
    if (!(await this.suspicious(seen))) return;
    if (this.deferring()) {
      // A pass may be between its claim write and its item write (or its leave): look again.
      const at = this.settings.now();
      this.pending.push({ phase: "claims", name: seen.service, at, found: "claim" });
      return;
    }
    await this.correctClaim(seen);
  }

  /**
   * The second look at a claim: the items of the meshes involved are read again (the phase's
   * copies may predate the passes that were in flight), then the claim is corrected as usual.
   */
  private async secondLookClaim(service: string): Promise<void> {
    const claim = (await this.ports.claims.getServices([service])).get(service);
    if (claim === undefined) return;
    const meshes = new Set([...(this.listedBy?.get(service) ?? []), ...claim.meshes.keys()]);
    const listedIn: string[] = [];
    for (const mesh of meshes) {
      const item = await this.ports.vipItems.get(mesh);
      this.items.set(mesh, item);
      if (own(item?.vips, service) !== undefined) listedIn.push(mesh);
    }
    this.listedBy?.set(service, listedIn);
    if (await this.suspicious(claim)) await this.correctClaim(claim);
  }

  private async correctClaim(seen: ServiceClaim): Promise<void> {
    // Found on a detection read: read it again, strongly, before correcting anything.
    const claim = this.strong
      ? seen
      : (await this.ports.claims.getServices([seen.service])).get(seen.service);
    if (claim === undefined) return;
    const { service } = claim;
    // Every mesh whose item lists the service must hold the item's membership (else a leave
    // elsewhere could release a listed VIP).
    const listedIn = this.listedBy?.get(service) ?? [];
    for (const mesh of listedIn) {
      const item = this.items.get(mesh);
      const vip = own(item?.vips, service);
      if (item === undefined || vip === undefined) continue;
      if (claim.meshes.get(mesh)?.incarnation !== item.incarnation) {
        await this.checkListed(mesh, item, service, vip, claim);
      }
    }
    if (
      claim.meshes.size === 0 &&
      claim.releasedAt === undefined &&
      listedIn.length === 0 &&
      this.only === undefined
    ) {
      const released =
        this.dry ||
        (await this.ports.claims.release({
          service,
          vip: claim.vip,
          nowMs: this.settings.now(),
          ...(claim.former !== undefined ? { former: claim.former } : {}),
        }));
      if (released) {
        if (!this.dry) this.freed++;
        this.record({ kind: "claim-unreleased", service, detail: { vip: claim.vip } });
      }
      return;
    }
    for (const [mesh, membership] of claim.meshes) {
      if (this.only !== undefined && !this.only.has(mesh)) continue;
      const item = await this.itemOf(mesh);
      const listed = own(item?.vips, service);
      if (item !== undefined && listed !== undefined) continue;
      if (item === undefined) {
        // A mesh with no item: its pass (phase 1, or its next event) creates one first.
        if (await this.ports.source.meshExists(mesh)) continue;
        await this.leave(claim, mesh, membership.incarnation, Number.MAX_SAFE_INTEGER, "no item");
        continue;
      }
      if (membership.incarnation !== item.incarnation) {
        // Of an incarnation that lost its create or was deleted: no one can commit it any more.
        await this.leave(claim, mesh, membership.incarnation, Number.MAX_SAFE_INTEGER, "dead");
        continue;
      }
      if (membership.version <= item.version) {
        await this.leave(claim, mesh, item.incarnation, item.version, "not listed");
        continue;
      }
      // Asserted for a version the item never reached: a pass died before its write, or is
      // writing now. Moving the item past that version first makes the leave safe: a pass
      // still in flight loses its write, re-reads, and asserts again what it lists.
      const fenced = await this.fence(item, membership.version);
      if (fenced !== undefined) {
        await this.leave(claim, mesh, fenced.incarnation, fenced.version, "never written");
      }
    }
  }

  /**
   * An address whose owner has no service claim at all is held for nobody: with no release
   * hint, the finder never offers it (a renumbered service's former address whose release
   * never hinted it); with one, a reclaim takes it. Either way it is dropped once no quarantine
   * can be running on it (a hint within the quarantine is left alone). Only such suspects are
   * checked (a former address, or one released long ago): the owner of a live address holds
   * it, and reading every owner would double the phase's reads. False when it was dropped.
   */
  private async sweepAddress(address: AddressClaim): Promise<boolean> {
    const cutoff = this.settings.now() - this.settings.quarantineSeconds * 1000;
    if (address.releasedAt !== undefined && address.releasedAt > cutoff) return true;
    if (address.releasedAt === undefined && address.former !== true) return true;
    const seen = await this.ports.claims.getServices([address.owner], this.strong);
    if (seen.has(address.owner)) return true;
    if (!this.strong && (await this.ports.claims.getServices([address.owner])).has(address.owner)) {
      return true;
    }
    const dropped = this.dry || (await this.ports.claims.dropOrphanAddress(address));
    if (!dropped) return true;
    if (!this.dry) this.dropped++;
    this.record({
      kind: "address-orphaned",
      service: address.owner,
      detail: { vip: address.vip },
    });
    return false;
  }

  private async fence(item: VipItem, past: number): Promise<VipItem | undefined> {
    if (this.dry) return { ...item, version: past };
    const next: VipItem = {
      ...item,
      version: past,
      updatedAt: new Date(this.settings.now()).toISOString(),
    };
    try {
      await this.ports.vipItems.put(next, item);
    } catch (error) {
      if (!(error instanceof VersionConflictError)) throw error;
      // The item moved on: the next cycle decides on the new one.
      this.items.delete(item.mesh);
      return undefined;
    }
    this.items.set(item.mesh, next);
    return next;
  }

  private async leave(
    claim: ServiceClaim,
    mesh: string,
    incarnation: string,
    upToVersion: number,
    why: string,
  ): Promise<void> {
    if (!this.dry) {
      const outcome = await leaveMesh(this.ports.claims, {
        service: claim.service,
        mesh,
        incarnation,
        upToVersion,
        nowMs: this.settings.now(),
      });
      if (outcome === "kept") return;
      if (outcome === "released") this.freed++;
    }
    this.record({
      kind: "membership-leak",
      mesh,
      service: claim.service,
      detail: { vip: claim.vip, why },
    });
  }

  /**
   * Addresses this invocation's claims phase released go into quarantine; with none, they are
   * free at once, and the meshes whose items list unallocated services get them now (as the
   * event path wakes them), not a cycle later.
   */
  private async wakeWaiting(): Promise<void> {
    const free = this.dropped > 0 || (this.freed > 0 && this.settings.quarantineSeconds === 0);
    if (this.dry || !free) return;
    // A finder of its own: the invocation's may have tried (and lost) these very addresses.
    const wake = createInvocation(this.ports, this.settings);
    for (const mesh of await this.ports.claims.getWaiting()) this.woken.add(mesh);
    await this.passWoken(wake.deps.addresses);
    await wake.finish();
  }

  /**
   * Meshes waiting for an address that a pass of this sweep freed (no quarantine): passed again
   * now, a bounded number of rounds, as the event path does.
   */
  private async passWoken(finder: AddressFinder = this.deps.addresses): Promise<void> {
    const useIndex = (this.settings.serviceSet ?? "index") === "index";
    await passWoken(this.woken, async (meshes) => {
      for (const mesh of meshes) {
        if (this.only !== undefined && !this.only.has(mesh)) continue;
        const outcome = await reconcileMesh(mesh, {
          ...this.deps,
          addresses: finder,
          ...(useIndex ? { view: indexView(this.ports.index, "all") } : {}),
        });
        this.itemRepairs(mesh, outcome);
        for (const other of outcome.wake ?? []) this.woken.add(other);
      }
    });
  }

  private async checkCounter(): Promise<void> {
    const cidr = this.settings.pool.cidr;
    const expected = this.state.counterAtStart;
    const counted = this.state.addressesInRange;
    const now = await this.ports.claims.readCounter(cidr);
    // Claimed during the scan: the count may be off by those; the next cycle looks again.
    if (expected === undefined || now !== expected || now === counted) return;
    // A batch that claimed an address before the scan may add it to the counter only after
    // (its count is written at its end): a stored sweep corrects a difference only when the
    // previous cycle found the same one.
    const delta = counted - now;
    const confirmed = !this.stored || this.previousDelta === delta;
    this.advance({ counterDelta: delta });
    if (!confirmed) return;
    const fixed = this.dry || (await this.ports.claims.setCounter(cidr, expected, counted));
    if (fixed) this.record({ kind: "pool-counter", detail: { cidr, from: now, to: counted } });
  }
}

function driftDetail(found: IndexDrift): Record<string, unknown> {
  return {
    dataplane: found.dataplane.name,
    dataplaneMesh: found.dataplane.mesh,
    missing: found.missing.map((pair) => pair.service),
    orphan: found.orphan.map((pair) => pair.service),
    staleRecord: found.staleRecord,
  };
}
