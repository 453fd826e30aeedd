import type { SweepPositionPort } from "../../store/ports.ts";
import type { Telemetry } from "../telemetry.ts";

/** At most one lag note per this long from one execution environment. */
export const LAG_NOTE_EVERY_MS = 10_000;

/**
 * What the stream handler does with each batch's lag (the age of its oldest record): past the
 * sweep's grace, the lag is noted in the claims table (`stream-lag`), at most once per
 * {@link LAG_NOTE_EVERY_MS} per execution environment, so the repair sweep counts nothing as a
 * fault while records may still be in flight (decision 132). The first batch within the grace
 * after an environment noted a lag notes that it caught up (a note whose `lagMs` is within the
 * grace): the lag episode is over, and drift found after it counts again (decision 134).
 * Otherwise, within the grace (ordinary traffic), nothing is written. A failed note is logged,
 * never fails the batch.
 */
export function lagNoter(
  claims: SweepPositionPort,
  graceMs: number,
  now: () => number,
  telemetry: Telemetry,
): (lagMs: number) => Promise<void> {
  let lastAt = Number.NEGATIVE_INFINITY;
  let noted = false;
  return async (lagMs) => {
    if (graceMs <= 0) return;
    const at = now();
    if (lagMs <= graceMs) {
      if (!noted) return;
      noted = false;
    } else {
      if (noted && at - lastAt < LAG_NOTE_EVERY_MS) return;
      noted = true;
    }
    lastAt = at;
    try {
      await claims.noteStreamLag({ at, lagMs });
    } catch (error) {
      telemetry.warn("could not note the stream's lag; the sweep may count drift in flight", {
        lagMs,
        error: error instanceof Error ? error.message : String(error),
      });
    }
  };
}
