/**
 * The event source mapping settings, shared by the CDK construct (real Lambda) and the local
 * stream poller (which plays Lambda's part), so local runs behave like production.
 * Reasons: docs/deploy.md (event source mapping settings) and docs/decisions/.
 */
export const EVENT_SOURCE_SETTINGS = {
  /** Records per invocation. Reconcile cost is per mesh, so bigger batches coalesce writes. */
  batchSize: 100,
  /** Wait up to this long to fill a batch: coalesces bursts into one write per mesh. */
  maxBatchingWindowSeconds: 1,
  /** Retries of a failing batch before it goes to the failure destination. */
  retryAttempts: 5,
  /** Records older than this go to the failure destination instead of blocking the shard. */
  maxRecordAgeSeconds: 3600,
  bisectBatchOnError: true,
  reportBatchItemFailures: true,
  parallelizationFactor: 1,
  startingPosition: "TRIM_HORIZON",
  /** How often a shard is polled (Lambda polls about four times a second). */
  pollIntervalMs: 250,
} as const;

/**
 * The stream lag the allocator tolerates, in whole seconds: the iterator-age alarm fires when the
 * newest record of every batch is older than this for 5 minutes; below it, lag is ordinary
 * (bursts, retries, cold starts). While the stream lags past the sweep's grace but within this,
 * the repair sweep counts no drift as a fault (decision 132).
 */
export const ITERATOR_AGE_TOLERANCE_SECONDS = 60;

/** What one normal batch may take to process (docs/deploy.md: "well under a few seconds"). */
export const BATCH_ALLOWANCE_SECONDS = 2;

/**
 * How long a change to an input table normally takes to reach the tables the repair sweep
 * compares, in whole seconds: one poll interval, then up to two batches on the shard (the one in
 * progress when the record arrives, then its own: parallelization factor 1), each waiting up to
 * the batching window and taking up to {@link BATCH_ALLOWANCE_SECONDS}. Drift younger than this
 * may be the event path's work in flight; the sweep looks at it again after this long before it
 * counts it as a fault (decision 071). Retries are not included: a batch is retried only after
 * the function failed, which the Errors alarm reports.
 */
export function inFlightGraceSeconds(
  batchingWindowSeconds: number = EVENT_SOURCE_SETTINGS.maxBatchingWindowSeconds,
): number {
  return Math.ceil(
    EVENT_SOURCE_SETTINGS.pollIntervalMs / 1000 +
      2 * (batchingWindowSeconds + BATCH_ALLOWANCE_SECONDS),
  );
}
