/**
 * The allocator's own invocations, besides stream batches: the scheduled repair sweep and the
 * one-shot backfill after a deployment onto tables that already hold data. EventBridge
 * Scheduler and the deployment trigger send these payloads as they are.
 */
export interface SweepEvent {
  readonly vipAllocator: "sweep";
  /** Start a new cycle from the first mesh instead of continuing the stored one. */
  readonly restart?: boolean;
}

/** A sweep that starts a new cycle (every mesh's index, item and claims), after a deployment. */
export interface BackfillEvent {
  readonly vipAllocator: "backfill";
}

export type AllocatorCommand = SweepEvent | BackfillEvent;

/** The payload the schedule sends. */
export const SCHEDULED_SWEEP: SweepEvent = { vipAllocator: "sweep" };
/** The payload the deployment trigger sends. */
export const BACKFILL: BackfillEvent = { vipAllocator: "backfill" };

/** True for a sweep or backfill payload (a stream batch has `Records`). */
export function isAllocatorCommand(event: unknown): event is AllocatorCommand {
  if (typeof event !== "object" || event === null) return false;
  const kind = (event as { vipAllocator?: unknown }).vipAllocator;
  return kind === "sweep" || kind === "backfill";
}
