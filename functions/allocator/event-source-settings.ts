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
