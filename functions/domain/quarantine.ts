/**
 * The quarantine rule, in one place: a VIP freed by a service that left every mesh goes to
 * another service only `quarantineSeconds` after its release (invariant 8), so a cached DNS
 * answer or sidecar config cannot reach the wrong service.
 */

/** The latest release time whose quarantine is over at `nowMs`. */
export function reclaimCutoffMs(nowMs: number, quarantineSeconds: number): number {
  return nowMs - quarantineSeconds * 1000;
}

/** Whether a claim released at `releasedAtMs` may go to another service at `nowMs`. */
export function quarantineOver(
  releasedAtMs: number,
  nowMs: number,
  quarantineSeconds: number,
): boolean {
  return releasedAtMs <= reclaimCutoffMs(nowMs, quarantineSeconds);
}
