import type { SweepState } from "../../store/ports.ts";
import { reconcileDataplanes } from "../membership-index/rebuild.ts";
import { METRIC } from "../telemetry-names.ts";
import { ClaimsAudit } from "./claims-audit.ts";
import { passWokenMeshes, secondLookMesh, sweepMesh } from "./mesh-phase.ts";
import { type Pending, SweepRun } from "./run.ts";
import type { SweepOptions, SweepPorts, SweepResult, SweepSettings } from "./types.ts";

/**
 * The repair sweep: whatever the event path missed (records lost to the failure destination,
 * a function killed mid-pass, items written before the stream existed), a cycle brings every
 * table back to the contract. Three phases, each paged and resumable (a backfill's cycle runs an
 * `index` phase first: the membership index derived from the dataplanes table, a page at a time):
 * 1. `meshes` (the meshes table, mesh-phase.ts): each mesh's part of the membership index is
 *    compared with the dataplanes table and repaired, then the mesh gets an ordinary pass;
 * 2. `items` (the vips table, item-phase.ts): items of meshes that no longer exist are removed
 *    (a pass);
 * 3. `claims` (the claims table, claims-audit.ts): the claims of the services each item lists
 *    are checked for its membership, memberships that no live item asserts are removed, claims
 *    no mesh uses are released, and the range's claim counter is checked against the addresses.
 * Every correction goes through a {@link Corrector} (a dry run's changes nothing) and is logged
 * and counted (`SweepRepairs`, by `kind`); a clean cycle reports none. It never takes a VIP
 * from a live service: a membership is removed only with the conditions of a leave, and one
 * newer than its item only after the item's version has been moved past it.
 */
export async function sweep(
  ports: SweepPorts,
  settings: SweepSettings,
  options: SweepOptions = {},
): Promise<SweepResult> {
  return await new Cycle(new SweepRun(ports, settings, options)).run();
}

/** The cycle and the sweep's position in it: one page of a phase at a time, saved after each. */
class Cycle {
  private readonly audit: ClaimsAudit;
  private storedVersion: number | undefined;

  constructor(private readonly sweep: SweepRun) {
    this.audit = new ClaimsAudit(sweep);
  }

  async run(): Promise<SweepResult> {
    const { sweep } = this;
    if (sweep.stored) {
      const saved = await sweep.ports.claims.getSweepState();
      this.storedVersion = saved?.version;
      // A continuation goes on with the cycle it was sent for; one that ended meanwhile (or that
      // another invocation finished) leaves nothing to do.
      if (sweep.options.resumeOnly === true && (saved === undefined || saved.phase === "done")) {
        return { cycle: saved?.cycle ?? "", finished: true, meshes: 0, repairs: [] };
      }
      // A backfill starts a cycle of its own, unless one is under way (an invocation that ran
      // out of time, or the same backfill delivered again): it goes on from its position.
      const backfillUnderway =
        sweep.options.backfill === true && saved?.backfill === true && saved.phase !== "done";
      const restart =
        sweep.options.restart === true || (sweep.options.backfill === true && !backfillUnderway);
      if (saved !== undefined && saved.phase !== "done" && !restart) {
        sweep.state = saved;
      }
      const previousDelta = saved?.phase === "done" ? saved.counterDelta : saved?.previousDelta;
      this.audit.previousDelta = previousDelta;
      if (previousDelta !== undefined) sweep.advance({ previousDelta });
      // Taking the position is itself conditional: of two sweeps, one goes on.
      if (!(await this.save())) return this.result(false, "superseded");
    }
    let stopped: SweepResult["stopped"];
    try {
      while (sweep.state.phase !== "done") {
        if (sweep.outOfTime()) {
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
      await sweep.corrector.finish();
    }
    const finished = sweep.state.phase === "done";
    const { telemetry } = sweep.ports;
    if (finished) {
      telemetry.metric(METRIC.sweepCycles, "Count", 1);
      telemetry.info("sweep cycle finished", {
        cycle: sweep.state.cycle,
        meshes: sweep.state.meshes,
        repairs: sweep.state.repairs,
        seconds: Math.round((sweep.settings.now() - sweep.state.startedAt) / 1000),
      });
    }
    if (sweep.examined > 0) telemetry.metric(METRIC.sweepMeshes, "Count", sweep.examined);
    return this.result(finished, stopped);
  }

  private result(finished: boolean, stopped: SweepResult["stopped"]): SweepResult {
    return {
      cycle: this.sweep.state.cycle,
      finished,
      ...(stopped !== undefined && !finished ? { stopped } : {}),
      meshes: this.sweep.examined,
      repairs: this.sweep.repairs,
      ...(this.sweep.indexRecordsWritten > 0
        ? { indexRecordsWritten: this.sweep.indexRecordsWritten }
        : {}),
      ...(this.sweep.state.backfill === true ? { backfill: true as const } : {}),
    };
  }

  private async save(): Promise<boolean> {
    const { sweep } = this;
    if (!sweep.stored) return true;
    const next: SweepState = { ...sweep.state, version: (this.storedVersion ?? 0) + 1 };
    if (!(await sweep.ports.claims.putSweepState(next, this.storedVersion))) return false;
    this.storedVersion = next.version;
    sweep.state = next;
    return true;
  }

  /** One page of the current phase; false when it stopped for time in the middle of it. */
  private async step(): Promise<boolean> {
    const { phase } = this.sweep.state;
    if (phase === "index") return await this.indexPage();
    if (phase === "meshes") return await this.meshesPage();
    if (phase === "items") return await this.itemsPage();
    if (phase === "claims") return await this.claimsPage();
    return true;
  }

  /**
   * Before each item of a page: false when out of time (the pending second looks are made
   * first); the pending looks are made early when too many wait.
   */
  private async room(): Promise<boolean> {
    const { sweep } = this;
    if (sweep.outOfTime(sweep.reserve())) {
      await secondLooks(sweep, this.audit);
      return false;
    }
    if (sweep.pending.length >= MAX_PENDING) await secondLooks(sweep, this.audit);
    sweep.startStep();
    return true;
  }

  /**
   * A backfill's first phase: one page of the dataplanes table, each dataplane's record and
   * entries made to say what it contributes (the rebuild's own conditional writes); the
   * position is the last dataplane read, so a rebuild of any size goes on in the next
   * invocation. Drift it leaves (entries no dataplane contributes any more) is found by each
   * mesh's index check in the next phase.
   */
  private async indexPage(): Promise<boolean> {
    const { sweep } = this;
    sweep.startStep();
    const page = await sweep.ports.source.dataplanePage(sweep.state.after, sweep.pageSize);
    for (const issue of page.issues) sweep.ports.telemetry.badInput(issue);
    sweep.indexRecordsWritten += await reconcileDataplanes(
      page.records.map((record) => ({ key: record, item: record.item })),
      sweep.ports.index,
      { reread: sweep.ports.source },
    );
    sweep.advance(
      page.next === undefined ? { phase: "meshes", after: undefined } : { after: page.next },
    );
    sweep.endStep();
    return true;
  }

  private async meshesPage(): Promise<boolean> {
    const { sweep } = this;
    const page = await sweep.meshesPage(sweep.state.after, (p) =>
      sweep.ports.source.meshPage(p, sweep.pageSize, sweep.strong),
    );
    for (const mesh of page.items) {
      if (!(await this.room())) return false;
      const found = await sweepMesh(sweep, mesh);
      if (found !== undefined) sweep.options.onMesh?.(mesh, found);
      sweep.examined++;
      sweep.advance({ after: mesh, meshes: sweep.state.meshes + 1 });
    }
    sweep.endStep();
    // Before the position moves past the page: every mesh of it has had its last look.
    await secondLooks(sweep, this.audit);
    await passWokenMeshes(sweep);
    if (page.next === undefined) sweep.advance({ phase: "items", after: undefined });
    return true;
  }

  private async itemsPage(): Promise<boolean> {
    const { sweep } = this;
    const page = await sweep.meshesPage(sweep.state.after, (p) =>
      sweep.ports.vipItems.meshPage(p, sweep.pageSize, sweep.strong),
    );
    for (const mesh of page.items) {
      if (!(await this.room())) return false;
      await sweepItem(sweep, mesh);
      sweep.advance({ after: mesh });
    }
    sweep.endStep();
    await secondLooks(sweep, this.audit);
    // A removed item's services may have freed addresses (no quarantine) for waiting meshes.
    await passWokenMeshes(sweep);
    if (page.next === undefined) sweep.advance({ phase: "claims", after: undefined });
    return true;
  }

  private async claimsPage(): Promise<boolean> {
    const { sweep, audit } = this;
    if (sweep.state.after === undefined && sweep.state.counterAtStart === undefined) {
      // Claims this sweep made are counted before the counter is compared with the scan.
      await sweep.corrector.finish();
      const counter = await sweep.ports.claims.readCounter(sweep.settings.pool.cidr);
      sweep.advance({ counterAtStart: counter, addressesInRange: 0 });
    }
    await audit.loadItems();
    const page = await sweep.ports.claims.scan(sweep.state.after, sweep.pageSize, sweep.strong);
    for (const item of page.items) {
      if (!(await this.room())) return false;
      if ("service" in item) await audit.sweepClaim(item.service);
      else if (!(await audit.sweepAddress(item.address))) {
        // Dropped: not counted.
      } else if (sweep.settings.pool.canonical(item.address.vip) !== undefined) {
        sweep.advance({ addressesInRange: sweep.state.addressesInRange + 1 });
      }
      sweep.advance({ after: item.key });
    }
    sweep.endStep();
    await secondLooks(sweep, audit);
    if (page.next !== undefined) sweep.advance({ after: page.next });
    else {
      // The counter first: the passes woken next add their own claims to it.
      await audit.checkCounter();
      await audit.wakeWaiting();
      sweep.advance({ phase: "done", after: undefined, finishedAt: sweep.settings.now() });
    }
    return true;
  }
}

/** Phase 2, each item of the vips table: items of meshes that no longer exist are removed. */
export async function sweepItem(run: SweepRun, mesh: string): Promise<void> {
  if (run.deferring()) {
    // First look: a mesh deleted a moment ago may have its record still on the way.
    if (await run.ports.source.meshExists(mesh)) return;
    run.pending.push({ phase: "items", name: mesh, at: run.settings.now(), found: "deleted" });
    return;
  }
  await correctItem(run, mesh);
}

/**
 * The item of a mesh that is gone is removed by the mesh's pass (dry: reported). The meshes
 * waiting for an address that its releases freed (no quarantine) are passed after the page.
 */
export async function correctItem(run: SweepRun, mesh: string): Promise<void> {
  if (await run.ports.source.meshExists(mesh)) return;
  const { repairs, wake } = await run.corrector.passDeletedMesh(mesh);
  for (const repair of repairs) run.record(repair);
  for (const other of wake) run.woken.add(other);
}

/** Meshes waiting for their second look before they are looked at (bounds the time needed). */
export const MAX_PENDING = 25;

/**
 * The second look at every pending mesh (or claim), once the grace since its first look has
 * passed (decision 071): the ordinary correction (strongly consistent re-reads, conditional
 * writes), counted as repairs. A mesh where it corrects nothing was in flight, and so is
 * everything corrected while the event path had noted its stream lagging past the grace within
 * the iterator-age tolerance (decision 132): corrected, counted as `SweepInFlight`.
 */
export async function secondLooks(run: SweepRun, audit: ClaimsAudit): Promise<void> {
  const { telemetry } = run.ports;
  while (run.pending.length > 0) {
    const next = run.pending[0] as Pending;
    const wait = next.at + run.graceMs - run.settings.now();
    if (wait > 0) await run.settings.sleep(wait);
    run.pending.shift();
    const before = run.repairs.length;
    const lagged = await run.streamLagged(next.at);
    run.lagging = lagged !== undefined;
    try {
      if (next.phase === "meshes") {
        const found = await secondLookMesh(run, next);
        run.options.onMesh?.(next.name, found);
      } else if (next.phase === "items") await correctItem(run, next.name);
      else await audit.secondLookClaim(next.name);
    } finally {
      run.lagging = false;
    }
    if (run.repairs.slice(before).every((repair) => repair.inFlight === true)) {
      telemetry.metric(METRIC.sweepInFlight, "Count", 1);
      telemetry.info("sweep: drift corrected by the event path meanwhile", {
        [next.phase === "claims" ? "kumaService" : "mesh"]: next.name,
        phase: next.phase,
        found: next.found,
        seconds: Math.round((run.settings.now() - next.at) / 1000),
        cycle: run.state.cycle,
        ...(lagged !== undefined ? { streamLagMs: lagged.lagMs, streamLagAt: lagged.at } : {}),
      });
    }
  }
}
