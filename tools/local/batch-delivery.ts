import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from "aws-lambda";

/**
 * Lambda's delivery of one batch read from a DynamoDB stream shard, as a state machine over an
 * `invoke` function: no streams, no files, no timers of its own. The caller supplies the clock,
 * the pause between retries and hooks that checkpoint, write failures and report.
 */

/** A stream record with what delivery needs to order and age it. */
export interface BatchEntry {
  readonly record: DynamoDBRecord;
  readonly sequence: bigint;
  readonly sequenceNumber: string;
  /** ApproximateCreationDateTime in milliseconds since the epoch. */
  readonly createdMs: number;
}

export type FailureCondition = "RetryAttemptsExhausted" | "RecordAgeExceeded";

/** The event source mapping settings delivery follows. */
export interface DeliverySettings {
  /** Retries of a failing batch (-1 = until the records are too old). */
  readonly retryAttempts: number;
  /** Records older than this give up (-1 = never). */
  readonly maxRecordAgeSeconds: number;
  readonly bisectBatchOnError: boolean;
}

/** What one invocation meant, read the way Lambda reads `ReportBatchItemFailures`. */
export type Invocation =
  | { readonly kind: "ok" }
  | { readonly kind: "partial"; readonly index: number }
  | { readonly kind: "error"; readonly error: string };

export type InvokeFunction = (
  event: DynamoDBStreamEvent,
) => Promise<DynamoDBBatchResponse | undefined | null>;

/** Records that gave up: what goes to the failure destination. */
export interface GaveUp {
  readonly entries: readonly BatchEntry[];
  readonly condition: FailureCondition;
  /** Invocations that included these records. */
  readonly invocations: number;
  readonly lastError: string | undefined;
  /** The last failure was the function's (it threw or answered nonsense), not a partial report. */
  readonly functionError: boolean;
}

export interface DeliveryHooks {
  /** After every invocation, with the records it carried. */
  readonly invoked?: (entries: readonly BatchEntry[], result: Invocation) => void | Promise<void>;
  /** Records processed: the checkpoint may move past the last one. */
  readonly delivered?: (entries: readonly BatchEntry[]) => void | Promise<void>;
  /** Records that gave up (the checkpoint may move past them too). */
  readonly gaveUp?: (failure: GaveUp) => void | Promise<void>;
}

export interface DeliveryOptions {
  readonly invoke: InvokeFunction;
  readonly settings: DeliverySettings;
  /** Milliseconds since the epoch. */
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
  /** Pause before retry number `retry` (from 1). */
  readonly retryDelayMs: (retry: number) => number;
  /** Checked before every step: true abandons what is not yet delivered. */
  readonly stopped?: () => boolean;
  readonly hooks?: DeliveryHooks;
}

export interface DeliveryResult {
  /** False when `stopped` interrupted the batch (what is left was not checkpointed). */
  readonly complete: boolean;
  /** Processed slices, in checkpoint order. */
  readonly delivered: ReadonlyArray<readonly BatchEntry[]>;
  readonly gaveUp: readonly GaveUp[];
  readonly invocations: number;
}

/** A slice of the batch still to be invoked (bisect splits one into two). */
interface Pending {
  entries: BatchEntry[];
  /** Failed invocations that counted as retries (splits do not, as in Lambda). */
  retries: number;
  invocations: number;
  lastError: string | undefined;
  functionError: boolean;
}

export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/**
 * Lambda's reading of a `ReportBatchItemFailures` response: none = success; the lowest
 * reported sequence number = resume point; an entry that is empty or names no record of the
 * batch = the whole batch failed.
 */
export function interpretResponse(response: unknown, entries: readonly BatchEntry[]): Invocation {
  if (response === undefined || response === null) return { kind: "ok" };
  const failures = (response as { batchItemFailures?: unknown }).batchItemFailures;
  if (failures === undefined || failures === null) return { kind: "ok" };
  if (!Array.isArray(failures)) {
    return { kind: "error", error: "batchItemFailures is not a list" };
  }
  if (failures.length === 0) return { kind: "ok" };
  let lowest: number | undefined;
  for (const failure of failures) {
    const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
    if (typeof id !== "string" || id === "") {
      return { kind: "error", error: `batchItemFailures entry without itemIdentifier` };
    }
    const index = entries.findIndex((e) => e.sequenceNumber === id);
    if (index < 0) {
      return { kind: "error", error: `batchItemFailures names ${id}, not in the batch` };
    }
    const entry = entries[index] as BatchEntry;
    if (lowest === undefined || entry.sequence < (entries[lowest] as BatchEntry).sequence) {
      lowest = index;
    }
  }
  return lowest === undefined ? { kind: "ok" } : { kind: "partial", index: lowest };
}

/** How many leading records are older than `maxRecordAgeSeconds` at `now`. */
export function expiredPrefix(
  entries: readonly BatchEntry[],
  maxRecordAgeSeconds: number,
  now: number,
): number {
  if (maxRecordAgeSeconds < 0) return 0;
  const limitMs = maxRecordAgeSeconds * 1000;
  let count = 0;
  while (count < entries.length && now - (entries[count] as BatchEntry).createdMs > limitMs) {
    count++;
  }
  return count;
}

/**
 * Delivers one batch the way Lambda does: partial failures resume from the lowest reported
 * sequence number, errors bisect the batch (splits are not retries), each remaining failure
 * is a retry, and records that run out of retries or age give up.
 */
export async function deliverBatch(
  entries: readonly BatchEntry[],
  options: DeliveryOptions,
): Promise<DeliveryResult> {
  const { settings, hooks = {} } = options;
  const delivered: BatchEntry[][] = [];
  const gaveUp: GaveUp[] = [];
  let invocations = 0;
  const deliver = async (slice: BatchEntry[]): Promise<void> => {
    if (slice.length === 0) return;
    delivered.push(slice);
    await hooks.delivered?.(slice);
  };
  const giveUp = async (
    pending: Pending,
    slice: BatchEntry[],
    condition: FailureCondition,
  ): Promise<void> => {
    const failure: GaveUp = {
      entries: slice,
      condition,
      invocations: pending.invocations,
      lastError: pending.lastError,
      functionError: pending.functionError,
    };
    gaveUp.push(failure);
    await hooks.gaveUp?.(failure);
  };
  const stack: Pending[] = [
    {
      entries: [...entries],
      retries: 0,
      invocations: 0,
      lastError: undefined,
      functionError: false,
    },
  ];
  while (stack.length > 0) {
    // Stopping abandons what is not delivered; it is read again after a restart.
    if (options.stopped?.() === true) return { complete: false, delivered, gaveUp, invocations };
    const head = stack[0] as Pending;
    const expired = expiredPrefix(head.entries, settings.maxRecordAgeSeconds, options.now());
    if (expired > 0) {
      await giveUp(head, head.entries.slice(0, expired), "RecordAgeExceeded");
      head.entries = head.entries.slice(expired);
      if (head.entries.length === 0) stack.shift();
      continue;
    }
    invocations++;
    head.invocations++;
    let result: Invocation;
    try {
      const response = await options.invoke({ Records: head.entries.map((e) => e.record) });
      result = interpretResponse(response, head.entries);
    } catch (error) {
      result = { kind: "error", error: describeError(error) };
    }
    await hooks.invoked?.(head.entries, result);
    if (result.kind === "ok") {
      await deliver(head.entries);
      stack.shift();
      continue;
    }
    if (result.kind === "partial") {
      await deliver(head.entries.slice(0, result.index));
      head.entries = head.entries.slice(result.index);
      head.lastError = "the handler reported batch item failures";
      head.functionError = false;
    } else {
      head.lastError = result.error;
      head.functionError = true;
      if (settings.bisectBatchOnError && head.entries.length > 1) {
        const half = Math.ceil(head.entries.length / 2);
        const split = (part: BatchEntry[]): Pending => ({ ...head, entries: part });
        stack.splice(0, 1, split(head.entries.slice(0, half)), split(head.entries.slice(half)));
        continue;
      }
    }
    head.retries++;
    if (settings.retryAttempts >= 0 && head.retries > settings.retryAttempts) {
      await giveUp(head, head.entries, "RetryAttemptsExhausted");
      stack.shift();
      continue;
    }
    await options.sleep(options.retryDelayMs(head.retries));
  }
  return { complete: true, delivered, gaveUp, invocations };
}
