import { Duration } from "aws-cdk-lib";
import {
  Alarm,
  ComparisonOperator,
  type IAlarmAction,
  type IMetric,
  MathExpression,
  Metric,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import type { Construct } from "constructs";
import {
  EVENT_SOURCE_SETTINGS,
  ITERATOR_AGE_TOLERANCE_SECONDS,
} from "../functions/allocator/config.ts";
import { METRIC } from "../functions/allocator/telemetry-names.ts";
import { VIP_ALLOCATOR_DEFAULTS } from "./vip-allocator-props.ts";

/**
 * The allocator's alarms (decision 132): each pages only for a real fault. One datapoint pages
 * where one datapoint already is a fault (a record given up, a service without a VIP, an item
 * too large, the range nearly full, a repair the event path needed); where one datapoint can be
 * noise (one transient SDK error, one lost race the stream retries, one throttled request the
 * SDK retried), three of the last five minutes must breach.
 */

/** Throttle alarms, one per table the construct has. */
export interface VipAllocatorTableAlarms {
  readonly meshes: Alarm;
  readonly dataplanes: Alarm;
  readonly externalServices?: Alarm;
  readonly vips: Alarm;
  readonly claims: Alarm;
  readonly index: Alarm;
}

/** The alarms the construct creates; all of them run `alarmActions`. */
export interface VipAllocatorAlarms {
  /** The stream lags: the newest record of a batch was written over a minute ago, for 5 minutes. */
  readonly iteratorAge: Alarm;
  /** The function failed (thrown error or timeout) in 3 of the last 5 minutes. */
  readonly errors: Alarm;
  /** The function was throttled in 3 of the last 5 minutes. */
  readonly throttles: Alarm;
  /** A batch gave up: a record's metadata is waiting in the failure queue. */
  readonly failureQueueDepth: Alarm;
  /** A service could not get a VIP because the range is full (the function's own metric). */
  readonly poolExhausted: Alarm;
  /** A mesh's VIP item could not be written within DynamoDB's item limit. */
  readonly itemTooLarge: Alarm;
  /** A VIP item written was larger than `itemSizeWarning` (early warning, below 400 KB). */
  readonly itemSizeWarning: Alarm;
  /** More than 80% of the range is held (quarantined VIPs included). */
  readonly poolUsedPercent: Alarm;
  /**
   * Meshes failed after all their attempts in 3 of the last 5 minutes (the function's own
   * metric; partial batch failures never move Lambda's `Errors`).
   */
  readonly meshFailures: Alarm;
  /** The repair sweep corrected something the event path missed (in flight not counted). */
  readonly sweepRepairs: Alarm;
  /** No sweep cycle finished in four sweep periods (missing data breaches); with a schedule. */
  readonly sweepHeartbeat?: Alarm;
  /** A table throttled requests in 3 of the last 5 minutes. */
  readonly tableThrottles: VipAllocatorTableAlarms;
}

export interface AlarmSources {
  readonly function: LambdaFunction;
  readonly failureQueue: Queue;
  readonly tables: { readonly [K in keyof VipAllocatorTableAlarms]: ITableV2 | undefined };
  /** The function's own metrics: their namespace and `service` dimension. */
  readonly telemetry: { readonly namespace: string; readonly service: string };
  /** The repair sweep's period; undefined: no schedule (no heartbeat). */
  readonly sweepSchedule: Duration | undefined;
  /** Bytes above which a written VIP item raises the early warning. */
  readonly itemSizeWarningBytes: number;
}

/** M of N for metrics where one datapoint can be noise: 3 of the last 5 one-minute periods. */
export const NOISE_TOLERANT = { evaluationPeriods: 5, datapointsToAlarm: 3 } as const;

/** The heartbeat's window, in sweep periods: no finished cycle in this long alarms. */
export const HEARTBEAT_SWEEP_PERIODS = 4;

interface AlarmSpec {
  readonly threshold: number;
  readonly comparison: ComparisonOperator;
  readonly missing: TreatMissingData;
  readonly evaluationPeriods?: number;
  readonly datapointsToAlarm?: number;
  readonly description: string;
}

/** The function's own metric with its `service` dimension. */
export function ownMetric(
  telemetry: AlarmSources["telemetry"],
  metricName: string,
  statistic: string,
  period: Duration = Duration.minutes(5),
): Metric {
  return new Metric({
    namespace: telemetry.namespace,
    metricName,
    dimensionsMap: { service: telemetry.service },
    statistic,
    period,
  });
}

/**
 * Read and write throttle events of one table (AWS/DynamoDB, by TableName), per minute. `n`:
 * a number for the expression's ids, distinct per table on one graph.
 */
export function tableThrottleMetric(table: ITableV2, label?: string, n = 0): MathExpression {
  const metric = (metricName: string) =>
    new Metric({
      namespace: "AWS/DynamoDB",
      metricName,
      dimensionsMap: { TableName: table.tableName },
      statistic: "Sum",
      period: Duration.minutes(1),
    });
  return new MathExpression({
    expression: `FILL(r${n}, 0) + FILL(w${n}, 0)`,
    usingMetrics: {
      [`r${n}`]: metric("ReadThrottleEvents"),
      [`w${n}`]: metric("WriteThrottleEvents"),
    },
    period: Duration.minutes(1),
    ...(label !== undefined ? { label } : {}),
  });
}

export function createAlarms(
  scope: Construct,
  sources: AlarmSources,
  actions: readonly IAlarmAction[],
): VipAllocatorAlarms {
  const fn = sources.function;
  const minute = Duration.minutes(1);
  const own = (name: string, statistic: string, period?: Duration) =>
    ownMetric(sources.telemetry, name, statistic, period);
  const alarm = (id: string, metric: IMetric, spec: AlarmSpec): Alarm => {
    const evaluationPeriods = spec.evaluationPeriods ?? 1;
    const created = new Alarm(scope, id, {
      metric,
      threshold: spec.threshold,
      evaluationPeriods,
      datapointsToAlarm: spec.datapointsToAlarm ?? evaluationPeriods,
      comparisonOperator: spec.comparison,
      treatMissingData: spec.missing,
      alarmDescription: spec.description,
    });
    // OK actions too: whoever was paged learns that the condition has cleared.
    if (actions.length > 0) {
      created.addAlarmAction(...actions);
      created.addOkAction(...actions);
    }
    return created;
  };
  const atLeast = ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD;
  const above = ComparisonOperator.GREATER_THAN_THRESHOLD;
  const below = ComparisonOperator.LESS_THAN_THRESHOLD;
  const quiet = TreatMissingData.NOT_BREACHING;
  const keep = TreatMissingData.IGNORE;
  const ageMs = ITERATOR_AGE_TOLERANCE_SECONDS * 1000;
  const sweepPeriod = sources.sweepSchedule ?? VIP_ALLOCATOR_DEFAULTS.sweepSchedule;
  const sizeKiB = (sources.itemSizeWarningBytes / 1024).toFixed(0);

  const tableAlarm = (key: keyof VipAllocatorTableAlarms, id: string): Alarm | undefined => {
    const table = sources.tables[key];
    if (table === undefined) return undefined;
    return alarm(`${id}ThrottlesAlarm`, tableThrottleMetric(table), {
      threshold: 0,
      comparison: above,
      missing: quiet,
      ...NOISE_TOLERANT,
      description:
        `The ${key} table throttled reads or writes in 3 of the last 5 minutes (the SDK retries ` +
        "a throttled request; sustained throttling slows the event path: on-demand tables " +
        "throttle above twice their previous peak, or at the account's table quota).",
    });
  };
  const required = (key: keyof VipAllocatorTableAlarms, id: string): Alarm =>
    tableAlarm(key, id) as Alarm;
  const externalServices = tableAlarm("externalServices", "ExternalServicesTable");

  return {
    iteratorAge: alarm(
      "IteratorAgeAlarm",
      fn.metric("IteratorAge", { statistic: "Maximum", period: minute }),
      {
        threshold: ageMs,
        comparison: above,
        missing: quiet,
        evaluationPeriods: 5,
        description:
          `Stream lag: the newest record of a batch was older than ${ageMs} ms for 5 minutes. ` +
          `Records older than ${EVENT_SOURCE_SETTINGS.maxRecordAgeSeconds} s go to the failure queue.`,
      },
    ),
    errors: alarm("ErrorsAlarm", fn.metricErrors({ statistic: "Sum", period: minute }), {
      threshold: 1,
      comparison: atLeast,
      missing: quiet,
      ...NOISE_TOLERANT,
      description:
        "The allocator function failed (a thrown error or a timeout) in 3 of the last 5 minutes; " +
        "each failed batch is retried and bisected. One failure is not a page.",
    }),
    throttles: alarm("ThrottlesAlarm", fn.metricThrottles({ statistic: "Sum", period: minute }), {
      threshold: 1,
      comparison: atLeast,
      missing: quiet,
      ...NOISE_TOLERANT,
      description:
        "The allocator function was throttled (account concurrency) in 3 of the last 5 " +
        "minutes; the stream falls behind.",
    }),
    failureQueueDepth: alarm(
      "FailureQueueAlarm",
      sources.failureQueue.metricApproximateNumberOfMessagesVisible({
        statistic: "Maximum",
        period: minute,
      }),
      {
        threshold: 1,
        comparison: atLeast,
        // SQS stops publishing for a queue idle for 6 hours: keep the last state.
        missing: keep,
        description:
          "Stream records gave up after the bounded retries or age; their metadata is in the " +
          "failure queue. Re-drive by touching the affected meshes within the 24 h stream " +
          "retention, or let the repair sweep correct them, then purge the queue.",
      },
    ),
    poolExhausted: alarm("PoolExhaustedAlarm", own(METRIC.exhausted, "Sum"), {
      threshold: 0,
      comparison: above,
      missing: quiet,
      description:
        "A service could not get a VIP: the range is full. Widen VIP_CIDR or shorten the quarantine.",
    }),
    itemTooLarge: alarm("ItemTooLargeAlarm", own(METRIC.itemTooLarge, "Sum"), {
      threshold: 1,
      comparison: atLeast,
      missing: quiet,
      description:
        "A mesh's VIP item outgrew DynamoDB's 400 KB item limit even compressed: the mesh keeps " +
        "its last good item and its new services get no VIP. Split the mesh.",
    }),
    itemSizeWarning: alarm("ItemSizeWarningAlarm", own(METRIC.itemBytes, "Maximum"), {
      threshold: sources.itemSizeWarningBytes,
      comparison: above,
      // Published only when an item is written: keep the last known state while idle.
      missing: keep,
      description:
        `A VIP item written was larger than ${sources.itemSizeWarningBytes} bytes (${sizeKiB} KiB); ` +
        "DynamoDB refuses items above 400 KB (then ItemTooLarge). Plan to split the mesh.",
    }),
    poolUsedPercent: alarm("PoolUsedPercentAlarm", own(METRIC.poolUsedPercent, "Maximum"), {
      threshold: VIP_ALLOCATOR_DEFAULTS.poolUsedPercentAlarm,
      comparison: above,
      // Published only when the function runs: keep the last known state while idle.
      missing: keep,
      description: `More than ${VIP_ALLOCATOR_DEFAULTS.poolUsedPercentAlarm}% of the VIP range is held (quarantined VIPs included).`,
    }),
    meshFailures: alarm("MeshFailuresAlarm", own(METRIC.meshFailures, "Sum", minute), {
      threshold: 0,
      comparison: above,
      missing: quiet,
      ...NOISE_TOLERANT,
      description:
        "Meshes failed after all their attempts in 3 of the last 5 minutes; their records are " +
        "retried, then go to the failure queue. Partial batch failures never show in Lambda " +
        "Errors: see the function's error logs (message 'mesh failed').",
    }),
    sweepRepairs: alarm(
      "SweepRepairsAlarm",
      // Only the `service` dimension: the total the function emits once per correction.
      own(METRIC.sweepRepairs, "Sum", sweepPeriod),
      {
        threshold: 0,
        comparison: above,
        missing: quiet,
        description:
          "The repair sweep corrected VIP items, claims or the membership index that the event " +
          "path missed (see the dashboard's repairs by kind and the function's 'sweep repair' " +
          "logs). Not counted: drift the event path still had in flight (a second look after " +
          "the grace, and nothing while the stream lagged past it within the iterator-age " +
          "tolerance) and a backfill's corrections.",
      },
    ),
    ...(sources.sweepSchedule !== undefined
      ? {
          sweepHeartbeat: alarm(
            "SweepHeartbeatAlarm",
            own(
              METRIC.sweepCycles,
              "Sum",
              Duration.minutes(HEARTBEAT_SWEEP_PERIODS * sources.sweepSchedule.toMinutes()),
            ),
            {
              threshold: 1,
              comparison: below,
              missing: TreatMissingData.BREACHING,
              description:
                `No repair sweep cycle finished in ${HEARTBEAT_SWEEP_PERIODS} sweep periods: the ` +
                "schedule is disabled, the function fails on the sweep payload (see its logs), " +
                "or a cycle needs more invocations than that (a very large fleet).",
            },
          ),
        }
      : {}),
    tableThrottles: {
      meshes: required("meshes", "MeshesTable"),
      dataplanes: required("dataplanes", "DataplanesTable"),
      ...(externalServices !== undefined ? { externalServices } : {}),
      vips: required("vips", "VipsTable"),
      claims: required("claims", "ClaimsTable"),
      index: required("index", "IndexTable"),
    },
  };
}

/** Every alarm, flat (the dashboard's alarm status widget). */
export function allAlarms(alarms: VipAllocatorAlarms): Alarm[] {
  const { tableThrottles, sweepHeartbeat, ...single } = alarms;
  return [
    ...Object.values(single),
    ...(sweepHeartbeat !== undefined ? [sweepHeartbeat] : []),
    ...Object.values(tableThrottles),
  ];
}
