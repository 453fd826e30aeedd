/**
 * Soak on the local engine (issue 29): the local runtime (StreamPoller) plays Lambda's part for
 * the real stream and sweep handlers on DynamoDB Local (or moto), in virtual time: 70 minutes of
 * dataplane changes (one every 5 s), with ordinary lag (four episodes where the stream is
 * delivered only every 40 to 55 s, records held back up to just under the iterator-age
 * tolerance), a repair sweep every 15 minutes (each inside a lag episode until the fault), three
 * invocations that fail once and two throttled DynamoDB requests (retried by the SDK). The
 * template's alarms, evaluated on what the run emitted, stay OK; one real fault (a record the
 * event path acknowledges without applying it) trips exactly the SweepRepairs alarm.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, PutCommand } from "@aws-sdk/lib-dynamodb";
import type { DynamoDBStreamEvent } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig, SCHEDULED_SWEEP } from "../../functions/allocator/config.ts";
import { createStreamHandler, createSweepHandler } from "../../functions/allocator/handlers.ts";
import type { MetricUnitName, Telemetry } from "../../functions/allocator/telemetry.ts";
import { METRIC, type MetricName } from "../../functions/allocator/telemetry-names.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { StreamPoller } from "../../tools/local/poller.ts";
import { seededRandom } from "../fixtures/in-memory-ports.ts";
import { synth } from "../infra/synth.ts";
import { type AlarmDefinition, alarmDefinitions, type Datapoint, evaluate } from "./alarms-soak.ts";
import { dataplane, startEmulator } from "./harness.ts";

const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };
const MINUTE = 60_000;
const SOAK_MINUTES = 70;
const STEP_MS = 5_000;
/** Lag episodes [from, to) in minutes: the stream is delivered only every 40 to 55 s. */
const LAG_EPISODES = [
  [5, 9],
  [20, 24],
  [35, 39],
  [50, 54],
] as const;
const SWEEPS_AT = [7, 22, 37, 52, 67];
const FAILED_INVOCATIONS_AT = [12, 31, 45];
const THROTTLES_AT = [16, 41];
/**
 * The real fault, in a quiet minute: a new dataplane's record acknowledged without being applied
 * (the event path missed a change); nothing writes that dataplane again.
 */
const LOST_RECORD_AT = 58;

/** The function's own metrics and log lines, stamped with the virtual clock. */
class SoakTelemetry implements Telemetry {
  readonly points: Datapoint[] = [];
  readonly lines: { level: string; message: string; data?: Record<string, unknown> }[] = [];
  constructor(private readonly now: () => number) {}
  metric(name: MetricName, _unit: MetricUnitName, value: number): void {
    this.points.push({ series: `own:${name}`, value, at: this.now() });
  }
  repair(kind: string, data: Record<string, unknown>, expected = false): void {
    this.lines.push({ level: "warn", message: `sweep repair ${kind}`, data });
    if (!expected) this.metric(METRIC.sweepRepairs, "Count", 1);
  }
  badInput(): void {
    this.metric(METRIC.badInput, "Count", 1);
  }
  info(message: string, data?: Record<string, unknown>): void {
    this.lines.push({ level: "info", message, ...(data ? { data } : {}) });
  }
  warn(message: string, data?: Record<string, unknown>): void {
    this.lines.push({ level: "warn", message, ...(data ? { data } : {}) });
  }
  error(message: string, data?: Record<string, unknown>): void {
    this.lines.push({ level: "error", message, ...(data ? { data } : {}) });
  }
}

interface SoakResult {
  readonly start: number;
  readonly points: readonly Datapoint[];
  readonly alarms: readonly AlarmDefinition[];
  readonly figures: Record<string, number>;
  readonly lines: SoakTelemetry["lines"];
}

async function soak(emulator: LocalEmulator): Promise<SoakResult> {
  const start = Math.ceil(Date.now() / 1000) * 1000;
  let t = start;
  const now = () => t;
  const minuteOf = () => Math.floor((t - start) / MINUTE);
  const random = seededRandom(29);
  const config = loadConfig({
    ...prefixedTableEnv(`soak${process.pid}`),
    DYNAMODB_ENDPOINT: emulator.endpoint,
  });
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
  const doc = DynamoDBDocumentClient.from(client);
  await createTables(client, config.tables);

  const telemetry = new SoakTelemetry(now);
  const points = telemetry.points;
  const handlerClient = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
  // Throttled requests: the SDK retries them; DynamoDB would count a throttle event.
  const tableKeys = new Map(Object.entries(config.tables).map(([key, name]) => [name, key]));
  let throttleNext = false;
  handlerClient.middlewareStack.add(
    (next) => async (args) => {
      const table = (args.input as { TableName?: string }).TableName;
      if (throttleNext && table !== undefined) {
        throttleNext = false;
        points.push({ series: `throttle:${tableKeys.get(table)}`, value: 1, at: t });
        throw Object.assign(new Error("injected throttle"), {
          name: "ProvisionedThroughputExceededException",
          $fault: "client",
          $metadata: {},
          $retryable: { throttling: true },
        });
      }
      return await next(args);
    },
    { step: "finalizeRequest", priority: "low", name: "soakThrottle" },
  );
  const handler = createStreamHandler(config, { client: handlerClient, telemetry, now });
  const sweepHandler = createSweepHandler(config, {
    client: handlerClient,
    telemetry,
    now,
    sleep: async (ms) => {
      t += ms;
      if (!holding()) await poller.drain();
    },
  });

  let failNext = false;
  let invocations = 0;
  let lost = 0;
  let maxHeldMs = 0;
  let gaveUp = 0;
  const poller = new StreamPoller({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
    tables: config.tables,
    failureFile: `.local/soak-failures-${process.pid}.jsonl`,
    retryDelayMs: () => 0,
    onBatch: (info) => {
      if (info.outcome === "gave-up") gaveUp += info.records.length;
    },
    handler: async (event: DynamoDBStreamEvent) => {
      invocations++;
      // Record times in virtual time: every item the soak writes carries it.
      let newest = 0;
      for (const record of event.Records) {
        const image = record.dynamodb?.NewImage as { soakAt?: { N?: string } } | undefined;
        const at = Number(image?.soakAt?.N ?? t);
        if (record.dynamodb) record.dynamodb.ApproximateCreationDateTime = Math.floor(at / 1000);
        newest = Math.max(newest, at);
        maxHeldMs = Math.max(maxHeldMs, t - at);
      }
      points.push({ series: "lambda:Invocations", value: 1, at: t });
      points.push({ series: "lambda:IteratorAge", value: t - newest, at: t });
      if (failNext) {
        failNext = false;
        points.push({ series: "lambda:Errors", value: 1, at: t });
        throw new Error("injected: the invocation failed once (retried by the event source)");
      }
      // The real fault: the record of dp-lost is acknowledged without being applied.
      const kept = event.Records.filter((record) => {
        const image = record.dynamodb?.NewImage as { name?: { S?: string } } | undefined;
        return image?.name?.S !== "dp-lost";
      });
      if (kept.length < event.Records.length) {
        lost += event.Records.length - kept.length;
        event.Records = kept;
      }
      try {
        return await handler(event);
      } catch (error) {
        points.push({ series: "lambda:Errors", value: 1, at: t });
        throw error;
      }
    },
  });

  let nextDrainAt = 0;
  const holding = () =>
    LAG_EPISODES.some(([from, to]) => minuteOf() >= from && minuteOf() < to) && t < nextDrainAt;

  const meshes = ["m0", "m1", "m2", "m3", "m4"];
  for (const mesh of meshes) {
    await doc.send(
      new PutCommand({ TableName: config.tables.meshes, Item: { name: mesh, soakAt: t } }),
    );
  }
  const services = Array.from({ length: 30 }, (_, i) => `svc-${i}`);
  let writes = 0;
  let sweeps = 0;
  const done = new Set<string>();
  const once = (key: string, minute: number) => {
    if (minuteOf() < minute || done.has(key)) return false;
    done.add(key);
    return true;
  };

  while (t < start + SOAK_MINUTES * MINUTE) {
    const minute = minuteOf();
    // One dataplane change: a random dataplane of a random mesh, one or two services.
    const mesh = meshes[Math.floor(random() * meshes.length)] as string;
    const pick = () => services[Math.floor(random() * services.length)] as string;
    const inbound = random() < 0.5 ? [pick()] : [pick(), pick()];
    await doc.send(
      new PutCommand({
        TableName: config.tables.dataplanes,
        Item: { ...dataplane(mesh, `dp-${Math.floor(random() * 8)}`, inbound), soakAt: t },
      }),
    );
    writes++;
    for (const m of FAILED_INVOCATIONS_AT) if (once(`fail${m}`, m)) failNext = true;
    for (const m of THROTTLES_AT) if (once(`throttle${m}`, m)) throttleNext = true;
    if (once("lost", LOST_RECORD_AT)) {
      // A dataplane of its own with a new service, never written again: only the sweep sees it.
      await doc.send(
        new PutCommand({
          TableName: config.tables.dataplanes,
          Item: { ...dataplane("m0", "dp-lost", ["svc-lost"]), soakAt: t },
        }),
      );
    }

    const inEpisode = LAG_EPISODES.some(([from, to]) => minute >= from && minute < to);
    if (!inEpisode || t >= nextDrainAt) {
      await poller.drain();
      nextDrainAt = t + 40_000 + Math.floor(random() * 4) * 5_000;
    }
    for (const m of SWEEPS_AT) {
      if (!once(`sweep${m}`, m)) continue;
      sweeps++;
      const deadline = t + 60_000;
      await sweepHandler(SCHEDULED_SWEEP, { getRemainingTimeInMillis: () => deadline - t });
    }
    if ((t - start) % MINUTE === 0) points.push({ series: "sqs:depth", value: gaveUp, at: t });
    t += STEP_MS;
  }
  await poller.drain();
  poller.destroy();
  client.destroy();
  handlerClient.destroy();

  const { template, allocator } = synth();
  return {
    start,
    points,
    alarms: alarmDefinitions(template, allocator),
    lines: telemetry.lines,
    figures: {
      virtualMinutes: SOAK_MINUTES,
      writes,
      invocations,
      sweeps,
      maxHeldSeconds: maxHeldMs / 1000,
      maxStreamLagSeconds:
        Math.max(
          ...points.filter((p) => p.series === `own:${METRIC.streamLagMs}`).map((p) => p.value),
        ) / 1000,
      failedInvocations: points.filter((p) => p.series === "lambda:Errors").length,
      throttleEvents: points.filter((p) => p.series.startsWith("throttle:")).length,
      recordsLost: lost,
      recordsGaveUp: gaveUp,
      sweepInFlight: points
        .filter((p) => p.series === `own:${METRIC.sweepInFlight}`)
        .reduce((a, p) => a + p.value, 0),
      sweepRepairs: points
        .filter((p) => p.series === `own:${METRIC.sweepRepairs}`)
        .reduce((a, p) => a + p.value, 0),
    },
  };
}

describe("soak: the template's alarms on what a run with ordinary lag emits", () => {
  let emulator: LocalEmulator;
  let result: SoakResult;

  beforeAll(async () => {
    emulator = await startEmulator();
    const started = Date.now();
    result = await soak(emulator);
    process.stderr.write(
      `[soak] ${JSON.stringify(result.figures)} in ${((Date.now() - started) / 1000).toFixed(0)} s real\n`,
    );
  }, 900_000);

  afterAll(async () => {
    await emulator?.stop();
  });

  it("held records back up to just under the iterator-age tolerance, and injected transient errors", () => {
    const { figures } = result;
    expect(figures.maxHeldSeconds).toBeGreaterThanOrEqual(40);
    expect(figures.maxHeldSeconds).toBeLessThan(60);
    expect(figures.failedInvocations).toBe(3);
    expect(figures.throttleEvents).toBe(2);
    expect(figures.recordsLost).toBeGreaterThan(0);
    // The sweeps in lag episodes found drift in flight and did not count it.
    expect(figures.sweepInFlight).toBeGreaterThan(0);
  });

  it("leaves every alarm OK until the real fault", () => {
    const beforeFault = result.start + LOST_RECORD_AT * MINUTE;
    const states = result.alarms.map((alarm) => ({
      id: alarm.id,
      alarmAt: evaluate(alarm, result.points, result.start, beforeFault).alarmAt,
    }));
    expect(states.length).toBe(16);
    expect(states.filter((s) => s.alarmAt.length > 0)).toEqual([]);
    // No repair counted before the fault: every drift the lagging sweeps found was in flight.
    const counted = result.points.filter(
      (p) => p.series === `own:${METRIC.sweepRepairs}` && p.at < beforeFault,
    );
    expect(counted).toEqual([]);
  });

  it("trips exactly the SweepRepairs alarm after the lost record", () => {
    const tripped = result.alarms
      .map((alarm) => ({
        id: alarm.id,
        run: evaluate(alarm, result.points, result.start, result.start + SOAK_MINUTES * MINUTE),
      }))
      .filter((s) => s.run.alarmAt.length > 0);
    expect(tripped.map((s) => s.id)).toHaveLength(1);
    expect(tripped[0]?.id).toMatch(/SweepRepairsAlarm/);
    expect(tripped[0]?.run.final).toBe("ALARM");
    expect(result.figures.sweepRepairs).toBeGreaterThan(0);
  });
});
