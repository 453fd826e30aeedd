import type { Page, StreamLagNote, SweepState } from "../../store/ports.ts";
import { ITERATOR_AGE_TOLERANCE_SECONDS } from "../config.ts";
import type { IndexDrift } from "../membership-index/rebuild.ts";
import type { ServiceSetView } from "../pass/service-set-view.ts";
import { BatchIngresses, indexView } from "../pass/service-set-view.ts";
import { type Corrector, DryCorrector, LiveCorrector } from "./corrector.ts";
import type { Repair, SweepOptions, SweepPorts, SweepSettings } from "./types.ts";

/**
 * Time kept back from the deadline to save the position: 5 s, or a fifth of a shorter
 * invocation's time (at least half a second).
 */
const SAFETY_MS = 5_000;
/** Time kept back, besides the grace, for the second looks of the pending meshes. */
const SECOND_LOOK_MS = 5_000;

/** A mesh (or, in the claims phase, a service) whose first look found drift. */
export interface Pending {
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

/**
 * One invocation of the sweep: its settings, its position in the cycle (`state`), what it has
 * corrected, and the {@link Corrector} its changes go through (live, or a dry run's).
 */
export class SweepRun {
  readonly corrector: Corrector;
  /** Only these meshes (`options.meshes`). */
  readonly only: ReadonlySet<string> | undefined;
  /** The position is kept in the claims table. */
  readonly stored: boolean;
  readonly pageSize: number;
  /** Strongly consistent detection reads. */
  readonly strong: boolean;
  /** The ingresses as the detection reads see them (read once per invocation). */
  readonly detected: BatchIngresses;
  /** The grace before a second look; 0: no first look, corrections at once. */
  readonly graceMs: number;
  readonly repairs: Repair[] = [];
  state: SweepState;
  examined = 0;
  /** Backfill: dataplane records this invocation's index phase wrote. */
  indexRecordsWritten = 0;
  /** Meshes a pass of this sweep woke (it freed addresses they wait for). */
  readonly woken = new Set<string>();
  /** Dataplanes whose drift this run reported. */
  readonly reported = new Set<string>();
  /** Meshes whose first look found drift, in the order found (decision 071). */
  readonly pending: Pending[] = [];
  /** While true, corrections are recorded as the event path's work in flight. */
  inFlight = false;
  /**
   * While true (a second look while the stream lagged past the grace, decision 132), every
   * correction is recorded as in flight too.
   */
  lagging = false;
  /** The stream-lag note as last read by a second look, and when (read again after 5 s). */
  private lagNote:
    | { readonly at: number; readonly note: Promise<StreamLagNote | undefined> }
    | undefined;
  /**
   * This invocation has taken a step (a page, or an item of one): out of time, it stops; a
   * first step is always taken, so a chain of short invocations always advances.
   */
  progressed = false;
  private readonly safetyMs: number;
  /** The longest step of this invocation so far, and when the one under way started. */
  private longestStepMs = 0;
  private stepAt: number | undefined;

  constructor(
    readonly ports: SweepPorts,
    readonly settings: SweepSettings,
    readonly options: SweepOptions,
  ) {
    this.only = options.meshes === undefined ? undefined : new Set(options.meshes);
    const dry = options.dryRun === true;
    this.stored = options.stored === true && !dry && this.only === undefined;
    this.pageSize = options.pageSize ?? 100;
    this.strong = settings.detection === "strong";
    this.graceMs = dry || options.backfill === true ? 0 : Math.max(0, options.graceMs ?? 0);
    const total = options.deadline === undefined ? undefined : options.deadline - settings.now();
    this.safetyMs = total === undefined ? SAFETY_MS : Math.min(SAFETY_MS, Math.max(500, total / 5));
    this.detected = new BatchIngresses(ports.source, this.strong);
    this.corrector = dry
      ? new DryCorrector(ports, settings.pool)
      : new LiveCorrector(ports, {
          ...settings,
          ...(options.budget !== undefined ? { budget: options.budget } : {}),
        });
    this.state = {
      cycle: settings.newId(),
      startedAt: settings.now(),
      // A backfill first derives the membership index from the dataplanes table.
      phase: options.backfill === true ? "index" : "meshes",
      after: undefined,
      meshes: 0,
      repairs: 0,
      addressesInRange: 0,
      counterAtStart: undefined,
      ...(options.backfill === true ? { backfill: true } : {}),
      version: 0,
    };
  }

  advance(change: Partial<SweepState>): void {
    this.state = { ...this.state, ...change };
  }

  /** Records a correction made (or, dry, found), and tells the telemetry through the corrector. */
  record(found: Repair): void {
    const inFlight = this.inFlight || this.lagging;
    const repair: Repair = inFlight ? { ...found, inFlight: true } : found;
    this.repairs.push(repair);
    this.advance({ repairs: this.state.repairs + 1 });
    this.options.onRepair?.(repair);
    const backfill = this.state.backfill === true;
    this.corrector.announce(
      repair,
      {
        ...(repair.mesh !== undefined ? { mesh: repair.mesh } : {}),
        // Not `service`: Powertools Logger reserves it (the allocator's own name) and drops it.
        ...(repair.service !== undefined ? { kumaService: repair.service } : {}),
        ...(repair.detail ?? {}),
        cycle: this.state.cycle,
        ...(backfill ? { backfill: true } : {}),
        ...(inFlight ? { inFlight: true } : {}),
        ...(this.lagging ? { streamLagged: true } : {}),
      },
      backfill || inFlight,
    );
  }

  /** Runs `correct` with its corrections recorded as in flight (or not); returns them. */
  async recording(inFlight: boolean, correct: () => Promise<void>): Promise<Repair[]> {
    const before = this.repairs.length;
    this.inFlight = inFlight;
    try {
      await correct();
    } finally {
      this.inFlight = false;
    }
    return this.repairs.slice(before);
  }

  /**
   * Whether the event path noted its stream lagging past the grace within the iterator-age
   * tolerance before `firstLookAt` (or since), and did not note since that it caught up before
   * `firstLookAt`: then what a first look found may be records still in flight, and nothing the
   * second look corrects counts as a fault (decisions 132, 134).
   */
  async streamLagged(firstLookAt: number): Promise<{ lagMs: number; at: number } | undefined> {
    const now = this.settings.now();
    if (this.lagNote === undefined || now - this.lagNote.at > 5_000) {
      // Unreadable: as if the stream did not lag (the repair then counts, as before 132).
      this.lagNote = { at: now, note: this.ports.claims.streamLag().catch(() => undefined) };
    }
    const note = await this.lagNote.note;
    if (note === undefined) return undefined;
    // A note within the grace says the lag ended then (decision 134): only a first look
    // before it may have met records still in flight.
    if (note.lagMs <= this.graceMs) return note.at > firstLookAt ? note : undefined;
    return note.at >= firstLookAt - ITERATOR_AGE_TOLERANCE_SECONDS * 1000 ? note : undefined;
  }

  /**
   * Whether a new step would not fit: the deadline less the safety, `reserveMs`, and half as
   * much again as the longest step so far. No new step either once the passes' budget is spent:
   * a step started then (a mesh's pass) would only have the time the budget keeps back for
   * finishing (decision 160).
   */
  outOfTime(reserveMs = 0): boolean {
    const deadline = this.options.deadline;
    if (deadline === undefined || !this.progressed) return false;
    if (this.options.budget?.expired() === true) return true;
    const margin = Math.max(this.safetyMs, this.longestStepMs * 1.5);
    return this.settings.now() > deadline - margin - reserveMs;
  }

  /** A step (an index page, or one item of a page) starts; the one before ends. */
  startStep(): void {
    this.endStep();
    this.stepAt = this.settings.now();
    this.progressed = true;
  }

  /** The step under way, if any, ends: its duration counts towards the margin. */
  endStep(): void {
    if (this.stepAt !== undefined) {
      this.longestStepMs = Math.max(this.longestStepMs, this.settings.now() - this.stepAt);
    }
    this.stepAt = undefined;
  }

  /** Whether a first look comes before corrections (a stored, scheduled cycle; not a backfill). */
  deferring(): boolean {
    return this.graceMs > 0 && this.state.backfill !== true;
  }

  /** What a new first look must leave time for: the grace and the second looks after it. */
  reserve(): number {
    return this.deferring() ? this.graceMs + SECOND_LOOK_MS : 0;
  }

  /** Whether `mesh` is swept by this run (all, or one of `options.meshes`). */
  covers(mesh: string): boolean {
    return this.only === undefined || this.only.has(mesh);
  }

  /** A page of mesh names: from the table, or (with `meshes`) the given ones, all at once. */
  async meshesPage(
    after: string | undefined,
    read: (after: string | undefined) => Promise<Page<string>>,
  ): Promise<Page<string>> {
    if (this.only === undefined) return await read(after);
    if (after !== undefined) return { items: [], next: undefined };
    return { items: [...this.only].sort(), next: undefined };
  }

  /** A pass's view of a mesh's whole service set: the index's. */
  wholeView(): ServiceSetView {
    return indexView(this.ports.index, "all");
  }
}
