import { METRIC } from "../telemetry-names.ts";
import type { ClaimsAudit } from "./claims-audit.ts";
import { correctItem } from "./item-phase.ts";
import { secondLookMesh } from "./mesh-phase.ts";
import type { Pending, SweepRun } from "./run.ts";

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
