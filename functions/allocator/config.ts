import { InvalidConfigError } from "../domain/errors.ts";
import { VipPool } from "../domain/pool.ts";
import { resolveTableNames, type TableNames } from "../store/table-definitions.ts";

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

/** Names and defaults of every setting; CDK sets the function's environment from these. */
export const SETTINGS = {
  cidr: { envVar: "VIP_CIDR", default: "240.0.0.0/4" },
  quarantineSeconds: { envVar: "VIP_QUARANTINE_SECONDS", default: "3600" },
  endpoint: { envVar: "DYNAMODB_ENDPOINT" },
  maxWriteAttempts: { envVar: "VIP_MAX_WRITE_ATTEMPTS", default: "6" },
  /** The repair sweep's second look at drift (decision 071); the construct derives it. */
  sweepGraceSeconds: { envVar: "SWEEP_GRACE_SECONDS", default: String(inFlightGraceSeconds()) },
} as const;

export interface AllocatorConfig {
  readonly pool: VipPool;
  readonly quarantineSeconds: number;
  readonly tables: TableNames;
  /** Set only for local emulators; unset means real AWS. */
  readonly endpoint: string | undefined;
  /** Read -> compute -> conditional write attempts per mesh before giving up. */
  readonly maxWriteAttempts: number;
  /**
   * The scheduled sweep looks again, after this long, at drift it found before it corrects and
   * counts it: drift the event path corrects meanwhile was in flight, not a fault. 0: at once.
   */
  readonly sweepGraceSeconds: number;
}

type Env = Readonly<Record<string, string | undefined>>;

function readInteger(env: Env, envVar: string, fallback: string, min: number, max: number): number {
  const raw = env[envVar];
  const text = raw === undefined || raw.trim() === "" ? fallback : raw.trim();
  if (!/^\d+$/.test(text)) {
    throw new InvalidConfigError(envVar, raw, `expected a whole number from ${min} to ${max}`);
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new InvalidConfigError(envVar, raw, `expected a whole number from ${min} to ${max}`);
  }
  return value;
}

/**
 * The only reader of the allocator's own settings in `process.env` (Powertools reads its own
 * variables, docs/contract.md#configuration). Throws {@link InvalidConfigError} (or
 * `InvalidCidrError`) naming the bad value, so a misconfigured function fails at cold start
 * instead of writing wrong VIPs.
 */
export function loadConfig(env: Env = process.env): AllocatorConfig {
  const cidrText = env[SETTINGS.cidr.envVar]?.trim() || SETTINGS.cidr.default;
  const pool = VipPool.parse(cidrText);
  const quarantineSeconds = readInteger(
    env,
    SETTINGS.quarantineSeconds.envVar,
    SETTINGS.quarantineSeconds.default,
    0,
    366 * 24 * 3600,
  );
  const maxWriteAttempts = readInteger(
    env,
    SETTINGS.maxWriteAttempts.envVar,
    SETTINGS.maxWriteAttempts.default,
    1,
    50,
  );
  const endpoint = env[SETTINGS.endpoint.envVar]?.trim() || undefined;
  if (endpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(endpoint)) {
    throw new InvalidConfigError(SETTINGS.endpoint.envVar, endpoint, "expected an http(s) URL");
  }
  const sweepGraceSeconds = readInteger(
    env,
    SETTINGS.sweepGraceSeconds.envVar,
    SETTINGS.sweepGraceSeconds.default,
    0,
    600,
  );
  return {
    pool,
    quarantineSeconds,
    tables: resolveTableNames(env),
    endpoint,
    maxWriteAttempts,
    sweepGraceSeconds,
  };
}

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
