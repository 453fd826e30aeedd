import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from "aws-lambda";
import { describe, expect, it } from "vitest";
import {
  type BatchEntry,
  type DeliveryOptions,
  type DeliveryResult,
  type DeliverySettings,
  deliverBatch,
  interpretResponse,
} from "../../tools/local/batch-delivery.ts";

/** A record with sequence number `seq`, created at `createdMs` (default: now, never too old). */
function entry(seq: number, createdMs = 1_000_000): BatchEntry {
  const sequenceNumber = String(seq);
  return {
    record: {
      eventID: `e${seq}`,
      eventName: "INSERT",
      dynamodb: { SequenceNumber: sequenceNumber },
    },
    sequence: BigInt(seq),
    sequenceNumber,
    createdMs,
  };
}

function entries(...seqs: number[]): BatchEntry[] {
  return seqs.map((seq) => entry(seq));
}

function seqs(list: readonly BatchEntry[]): number[] {
  return list.map((e) => Number(e.sequenceNumber));
}

function seqsOf(event: DynamoDBStreamEvent): number[] {
  return event.Records.map((r) => Number(r.dynamodb?.SequenceNumber));
}

const SETTINGS: DeliverySettings = {
  retryAttempts: 2,
  maxRecordAgeSeconds: -1,
  bisectBatchOnError: false,
};

type Answer = (records: number[]) => DynamoDBBatchResponse | undefined | null;

/** Runs one batch with a scripted handler; records every invocation, sleep and hook call. */
async function run(
  batch: BatchEntry[],
  answer: Answer,
  options: Partial<Omit<DeliveryOptions, "invoke" | "settings">> & {
    settings?: Partial<DeliverySettings>;
  } = {},
) {
  const invocations: number[][] = [];
  const sleeps: number[] = [];
  const hooks: string[] = [];
  let clock = 1_000_000;
  const result: DeliveryResult = await deliverBatch(batch, {
    now: () => clock,
    sleep: async (ms) => {
      sleeps.push(ms);
      clock += ms;
    },
    retryDelayMs: (retry) => retry * 10,
    ...options,
    settings: { ...SETTINGS, ...options.settings },
    invoke: async (event) => {
      const records = seqsOf(event);
      invocations.push(records);
      return answer(records);
    },
    hooks: {
      invoked: (list, outcome) => {
        hooks.push(`invoked ${seqs(list).join(",")}: ${outcome.kind}`);
      },
      delivered: (list) => {
        hooks.push(`delivered ${seqs(list).join(",")}`);
      },
      gaveUp: (failure) => {
        hooks.push(`gave up ${seqs(failure.entries).join(",")}: ${failure.condition}`);
      },
    },
  });
  return { result, invocations, sleeps, hooks };
}

const ok: Answer = () => ({ batchItemFailures: [] });
const failFrom =
  (...ids: string[]): Answer =>
  () => ({ batchItemFailures: ids.map((itemIdentifier) => ({ itemIdentifier })) });
const throwOn =
  (poison: number): Answer =>
  (records) => {
    if (records.includes(poison)) throw new Error(`poison ${poison}`);
    return { batchItemFailures: [] };
  };

describe("deliverBatch", () => {
  it("invokes once with the whole batch and delivers it when the handler reports no failure", async () => {
    const { result, invocations, sleeps, hooks } = await run(entries(1, 2, 3), ok);

    expect(invocations).toEqual([[1, 2, 3]]);
    expect(result.complete).toBe(true);
    expect(result.delivered.map(seqs)).toEqual([[1, 2, 3]]);
    expect(result.gaveUp).toEqual([]);
    expect(result.invocations).toBe(1);
    expect(sleeps).toEqual([]);
    expect(hooks).toEqual(["invoked 1,2,3: ok", "delivered 1,2,3"]);
  });

  it.each([
    ["undefined", undefined],
    ["null", null],
    ["an object without batchItemFailures", {} as DynamoDBBatchResponse],
  ])("reads %s as success", async (_name, response) => {
    const { result, invocations } = await run(entries(1, 2), () => response);

    expect(invocations).toEqual([[1, 2]]);
    expect(result.delivered.map(seqs)).toEqual([[1, 2]]);
  });

  it("delivers the records before a partial failure and retries from the lowest reported one", async () => {
    let calls = 0;
    const { result, invocations, sleeps, hooks } = await run(entries(1, 2, 3, 4, 5), (records) =>
      calls++ === 0 ? failFrom("4", "3")(records) : ok(records),
    );

    expect(invocations).toEqual([
      [1, 2, 3, 4, 5],
      [3, 4, 5],
    ]);
    expect(result.delivered.map(seqs)).toEqual([
      [1, 2],
      [3, 4, 5],
    ]);
    expect(sleeps).toEqual([10]);
    expect(hooks).toEqual([
      "invoked 1,2,3,4,5: partial",
      "delivered 1,2",
      "invoked 3,4,5: ok",
      "delivered 3,4,5",
    ]);
  });

  it("does not bisect on a partial failure and gives the rest up after the retries, as a report, not a function error", async () => {
    const { result, invocations, sleeps } = await run(entries(1, 2, 3), failFrom("2"), {
      settings: { bisectBatchOnError: true, retryAttempts: 1 },
    });

    expect(invocations).toEqual([
      [1, 2, 3],
      [2, 3],
    ]);
    expect(sleeps).toEqual([10]);
    expect(result.delivered.map(seqs)).toEqual([[1]]);
    expect(result.gaveUp.map((g) => ({ ...g, entries: seqs(g.entries) }))).toEqual([
      {
        entries: [2, 3],
        condition: "RetryAttemptsExhausted",
        invocations: 2,
        lastError: "the handler reported batch item failures",
        functionError: false,
      },
    ]);
  });

  it("bisects a batch whose invocation throws, retries the failing half and gives up the poison record alone", async () => {
    const { result, invocations, sleeps, hooks } = await run(entries(1, 2, 3, 4), throwOn(3), {
      settings: { bisectBatchOnError: true, retryAttempts: 1 },
    });

    expect(invocations).toEqual([[1, 2, 3, 4], [1, 2], [3, 4], [3], [3], [4]]);
    expect(sleeps).toEqual([10]);
    expect(result.delivered.map(seqs)).toEqual([[1, 2], [4]]);
    expect(result.gaveUp.map((g) => ({ ...g, entries: seqs(g.entries) }))).toEqual([
      {
        entries: [3],
        condition: "RetryAttemptsExhausted",
        invocations: 4,
        lastError: "Error: poison 3",
        functionError: true,
      },
    ]);
    expect(result.invocations).toBe(6);
    expect(hooks).toEqual([
      "invoked 1,2,3,4: error",
      "invoked 1,2: ok",
      "delivered 1,2",
      "invoked 3,4: error",
      "invoked 3: error",
      "invoked 3: error",
      "gave up 3: RetryAttemptsExhausted",
      "invoked 4: ok",
      "delivered 4",
    ]);
  });

  it("bisects an odd batch with the larger half first, and splits do not count as retries", async () => {
    const { result, invocations, sleeps } = await run(entries(1, 2, 3, 4, 5), throwOn(5), {
      settings: { bisectBatchOnError: true, retryAttempts: 0 },
    });

    expect(invocations).toEqual([[1, 2, 3, 4, 5], [1, 2, 3], [4, 5], [4], [5]]);
    expect(sleeps).toEqual([]);
    expect(result.delivered.map(seqs)).toEqual([[1, 2, 3], [4]]);
    expect(result.gaveUp.map((g) => [seqs(g.entries), g.condition, g.invocations])).toEqual([
      [[5], "RetryAttemptsExhausted", 3],
    ]);
  });

  it("retries a throwing handler with the whole batch when bisecting is off, then gives the batch up", async () => {
    const { result, invocations, sleeps } = await run(entries(1, 2), throwOn(2), {
      settings: { retryAttempts: 2 },
    });

    expect(invocations).toEqual([
      [1, 2],
      [1, 2],
      [1, 2],
    ]);
    expect(sleeps).toEqual([10, 20]);
    expect(result.delivered).toEqual([]);
    expect(result.gaveUp).toHaveLength(1);
    expect(seqs(result.gaveUp[0]?.entries ?? [])).toEqual([1, 2]);
    expect(result.gaveUp[0]?.condition).toBe("RetryAttemptsExhausted");
    expect(result.gaveUp[0]?.invocations).toBe(3);
    expect(result.gaveUp[0]?.functionError).toBe(true);
  });

  it("gives up with zero retries after the first failed invocation", async () => {
    const { result, invocations, sleeps } = await run(entries(1), throwOn(1), {
      settings: { retryAttempts: 0 },
    });

    expect(invocations).toEqual([[1]]);
    expect(sleeps).toEqual([]);
    expect(result.gaveUp.map((g) => g.condition)).toEqual(["RetryAttemptsExhausted"]);
  });

  it("treats a response naming a record outside the batch as a failure of the whole batch", async () => {
    const { result, invocations } = await run(entries(1, 2), failFrom("99"), {
      settings: { retryAttempts: 0 },
    });

    expect(invocations).toEqual([[1, 2]]);
    expect(result.delivered).toEqual([]);
    expect(result.gaveUp[0]?.lastError).toBe("batchItemFailures names 99, not in the batch");
    expect(result.gaveUp[0]?.functionError).toBe(true);
  });

  it("gives up records older than the maximum age before invoking, and delivers the younger ones", async () => {
    const batch = [entry(1, 0), entry(2, 0), entry(3, 990_000)];

    const { result, invocations, hooks } = await run(batch, ok, {
      settings: { maxRecordAgeSeconds: 60 },
    });

    expect(invocations).toEqual([[3]]);
    expect(result.gaveUp.map((g) => ({ ...g, entries: seqs(g.entries) }))).toEqual([
      {
        entries: [1, 2],
        condition: "RecordAgeExceeded",
        invocations: 0,
        lastError: undefined,
        functionError: false,
      },
    ]);
    expect(result.delivered.map(seqs)).toEqual([[3]]);
    expect(hooks).toEqual(["gave up 1,2: RecordAgeExceeded", "invoked 3: ok", "delivered 3"]);
  });

  it("retries without limit until the records grow too old when retry attempts are -1", async () => {
    // Created at the start; each retry waits 10 s; older than 60 s after the seventh wait.
    const { result, invocations, sleeps } = await run(entries(1, 2), throwOn(1), {
      settings: { retryAttempts: -1, maxRecordAgeSeconds: 60 },
      retryDelayMs: () => 10_000,
    });

    expect(invocations).toEqual(Array.from({ length: 7 }, () => [1, 2]));
    expect(sleeps).toEqual(Array.from({ length: 7 }, () => 10_000));
    expect(result.gaveUp.map((g) => ({ ...g, entries: seqs(g.entries) }))).toEqual([
      {
        entries: [1, 2],
        condition: "RecordAgeExceeded",
        invocations: 7,
        lastError: "Error: poison 1",
        functionError: true,
      },
    ]);
  });

  it("stops before the next invocation when told to, leaving the rest undelivered", async () => {
    let stop = false;
    const { result, invocations } = await run(
      entries(1, 2, 3),
      (records) => {
        stop = true;
        return failFrom("2")(records);
      },
      { stopped: () => stop },
    );

    expect(invocations).toEqual([[1, 2, 3]]);
    expect(result.complete).toBe(false);
    expect(result.delivered.map(seqs)).toEqual([[1]]);
    expect(result.gaveUp).toEqual([]);
  });
});

describe("interpretResponse", () => {
  const batch = entries(10, 20, 30);

  it("resumes from the lowest reported sequence number, compared as numbers", () => {
    const wide = [entry(9), entry(10), entry(100)];

    expect(interpretResponse(failFrom("100", "10")([]), wide)).toEqual({
      kind: "partial",
      index: 1,
    });
  });

  it.each([
    [{ batchItemFailures: "x" }, "batchItemFailures is not a list"],
    [{ batchItemFailures: [{}] }, "batchItemFailures entry without itemIdentifier"],
    [
      { batchItemFailures: [{ itemIdentifier: "" }] },
      "batchItemFailures entry without itemIdentifier",
    ],
    [{ batchItemFailures: [null] }, "batchItemFailures entry without itemIdentifier"],
  ])("reads %j as a failure of the whole batch", (response, error) => {
    expect(interpretResponse(response, batch)).toEqual({ kind: "error", error });
  });
});
