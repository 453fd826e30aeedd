import { Duration } from "aws-cdk-lib";
import {
  type Alarm,
  AlarmStatusWidget,
  ComparisonOperator,
  Dashboard,
  GraphWidget,
  type IAlarmAction,
  MathExpression,
  Metric,
  TextWidget,
  TreatMissingData,
} from "aws-cdk-lib/aws-cloudwatch";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import type { DynamoEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { EVENT_SOURCE_SETTINGS } from "../functions/allocator/event-source-settings.ts";
import { METRIC, SWEEP_REPAIR_DIMENSION } from "../functions/allocator/telemetry-names.ts";
import { VIP_ALLOCATOR_DEFAULTS } from "./vip-allocator-props.ts";

/** The alarms the construct creates; all of them run `alarmActions`. */
export interface VipAllocatorAlarms {
  /** The stream lags: the oldest record of a batch was written over a minute ago. */
  readonly iteratorAge: Alarm;
  /** The function failed (errors are retried, then bisected, then sent to the failure queue). */
  readonly errors: Alarm;
  /** The function was throttled. */
  readonly throttles: Alarm;
  /** A batch gave up: a record's metadata is waiting in the failure queue. */
  readonly failureQueueDepth: Alarm;
  /** A service could not get a VIP because the range is full (the function's own metric). */
  readonly poolExhausted: Alarm;
  /** A mesh's VIP item could not be written within DynamoDB's item limit. */
  readonly itemTooLarge: Alarm;
  /** More than 80% of the range is held (quarantined VIPs included). */
  readonly poolUsedPercent: Alarm;
  /**
   * A mesh failed after all its attempts (the function's own metric). Partial batch failures
   * are reported as `batchItemFailures` and never move Lambda's `Errors`.
   */
  readonly meshFailures: Alarm;
  /** The repair sweep corrected something: the event path missed it. */
  readonly sweepRepairs: Alarm;
}

export interface VipAllocatorMonitoringProps {
  readonly function: LambdaFunction;
  readonly failureQueue: Queue;
  readonly meshesEventSource: DynamoEventSource;
  readonly dataplanesEventSource: DynamoEventSource;
  readonly vipCidr: string;
  /** The function's own metrics: their namespace and `service` dimension. */
  readonly telemetry: { readonly namespace: string; readonly service: string };
  readonly alarmActions: readonly IAlarmAction[];
  /**
   * Period of the repair sweep: the `SweepRepairs` alarm sums repairs over one period.
   *
   * @default - no schedule; the alarm sums over the default sweep period
   */
  readonly sweepSchedule?: Duration;
}

/** The allocator's alarms and dashboard, over the function's, the streams' and its own metrics. */
export class VipAllocatorMonitoring extends Construct {
  readonly alarms: VipAllocatorAlarms;
  readonly dashboard: Dashboard;
  private readonly function: LambdaFunction;
  private readonly failureQueue: Queue;
  private readonly meshesEventSource: DynamoEventSource;
  private readonly dataplanesEventSource: DynamoEventSource;
  private readonly vipCidr: string;
  private readonly telemetry: { readonly namespace: string; readonly service: string };
  private readonly sweepPeriod: Duration;

  constructor(scope: Construct, id: string, props: VipAllocatorMonitoringProps) {
    super(scope, id);
    this.function = props.function;
    this.failureQueue = props.failureQueue;
    this.meshesEventSource = props.meshesEventSource;
    this.dataplanesEventSource = props.dataplanesEventSource;
    this.vipCidr = props.vipCidr;
    this.telemetry = props.telemetry;
    this.sweepPeriod = props.sweepSchedule ?? VIP_ALLOCATOR_DEFAULTS.sweepSchedule;
    this.alarms = this.createAlarms(props.alarmActions);
    this.dashboard = this.createDashboard();
  }

  private ownMetric(metricName: string, statistic: string, period = Duration.minutes(5)): Metric {
    return new Metric({
      namespace: this.telemetry.namespace,
      metricName,
      dimensionsMap: { service: this.telemetry.service },
      statistic,
      period,
    });
  }

  private createAlarms(actions: readonly IAlarmAction[]): VipAllocatorAlarms {
    const fn: LambdaFunction = this.function;
    const minute = Duration.minutes(1);
    const fiveMinutes = Duration.minutes(5);
    const alarm = (
      id: string,
      metric: Metric | MathExpression,
      threshold: number,
      evaluationPeriods: number,
      comparisonOperator: ComparisonOperator,
      treatMissingData: TreatMissingData,
      alarmDescription: string,
    ): Alarm => {
      const created = metric.createAlarm(this, id, {
        threshold,
        evaluationPeriods,
        datapointsToAlarm: evaluationPeriods,
        comparisonOperator,
        treatMissingData,
        alarmDescription,
      });
      // OK actions too: whoever was paged learns that the condition has cleared.
      if (actions.length > 0) {
        created.addAlarmAction(...actions);
        created.addOkAction(...actions);
      }
      return created;
    };
    const ageMs = VIP_ALLOCATOR_DEFAULTS.iteratorAgeAlarm.toMilliseconds();
    const atLeast = ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD;
    const above = ComparisonOperator.GREATER_THAN_THRESHOLD;
    return {
      iteratorAge: alarm(
        "IteratorAgeAlarm",
        fn.metric("IteratorAge", { statistic: "Maximum", period: minute }),
        ageMs,
        5,
        above,
        TreatMissingData.NOT_BREACHING,
        `Stream lag: the newest record of a batch was older than ${ageMs} ms for 5 minutes. ` +
          `Records older than ${EVENT_SOURCE_SETTINGS.maxRecordAgeSeconds} s go to the failure queue.`,
      ),
      errors: alarm(
        "ErrorsAlarm",
        fn.metricErrors({ statistic: "Sum", period: fiveMinutes }),
        1,
        1,
        atLeast,
        TreatMissingData.NOT_BREACHING,
        "The allocator function failed (a thrown error or a timeout); the batch is retried and bisected.",
      ),
      throttles: alarm(
        "ThrottlesAlarm",
        fn.metricThrottles({ statistic: "Sum", period: fiveMinutes }),
        1,
        1,
        atLeast,
        TreatMissingData.NOT_BREACHING,
        "The allocator function was throttled (account concurrency); the stream falls behind.",
      ),
      failureQueueDepth: alarm(
        "FailureQueueAlarm",
        this.failureQueue.metricApproximateNumberOfMessagesVisible({
          statistic: "Maximum",
          period: minute,
        }),
        1,
        1,
        atLeast,
        // SQS stops publishing for a queue idle for 6 hours: keep the last state.
        TreatMissingData.IGNORE,
        "Stream records gave up after the bounded retries or age; their metadata is in the failure queue. " +
          "Re-drive by touching the affected meshes within the 24 h stream retention.",
      ),
      poolExhausted: alarm(
        "PoolExhaustedAlarm",
        this.ownMetric(METRIC.exhausted, "Sum"),
        0,
        1,
        above,
        TreatMissingData.NOT_BREACHING,
        "A service could not get a VIP: the range is full. Widen VIP_CIDR or shorten the quarantine.",
      ),
      itemTooLarge: alarm(
        "ItemTooLargeAlarm",
        this.ownMetric(METRIC.itemTooLarge, "Sum"),
        1,
        1,
        atLeast,
        TreatMissingData.NOT_BREACHING,
        "A mesh's VIP item outgrew DynamoDB's 400 KB item limit even compressed: the mesh keeps " +
          "its last good item and its new services get no VIP. Split the mesh.",
      ),
      poolUsedPercent: alarm(
        "PoolUsedPercentAlarm",
        this.ownMetric(METRIC.poolUsedPercent, "Maximum"),
        VIP_ALLOCATOR_DEFAULTS.poolUsedPercentAlarm,
        1,
        above,
        // Published only when the function runs: keep the last known state while idle.
        TreatMissingData.IGNORE,
        `More than ${VIP_ALLOCATOR_DEFAULTS.poolUsedPercentAlarm}% of the VIP range is held (quarantined VIPs included).`,
      ),
      meshFailures: alarm(
        "MeshFailuresAlarm",
        this.ownMetric(METRIC.meshFailures, "Sum", minute),
        0,
        1,
        above,
        TreatMissingData.NOT_BREACHING,
        "A mesh failed after all its attempts; its records are retried, then go to the failure " +
          "queue. Partial batch failures never show in Lambda Errors: see the function's error logs.",
      ),
      sweepRepairs: alarm(
        "SweepRepairsAlarm",
        // Only the `service` dimension: the total over every kind of correction.
        this.ownMetric(METRIC.sweepRepairs, "Sum", this.sweepPeriod),
        0,
        1,
        above,
        TreatMissingData.NOT_BREACHING,
        "The repair sweep corrected VIP items, claims or the membership index: the event path " +
          "missed a change (see the dashboard's repairs by kind and the function's logs). " +
          "Expected once after a backfill onto existing tables.",
      ),
    };
  }

  private createDashboard(): Dashboard {
    const fn = this.function;
    const minute = Duration.minutes(1);
    const sum = (name: string): Metric => this.ownMetric(name, "Sum", minute);
    const esmMetric = (source: DynamoEventSource, metricName: string, label: string): Metric =>
      new Metric({
        namespace: "AWS/Lambda",
        metricName,
        dimensionsMap: { EventSourceMappingUUID: source.eventSourceMappingId },
        statistic: "Sum",
        period: minute,
        label,
      });
    const width = 8;
    const dashboard = new Dashboard(this, "Dashboard", {
      defaultInterval: Duration.hours(3),
    });
    dashboard.addWidgets(
      new TextWidget({
        markdown:
          `## VIP allocator\nRange \`${this.vipCidr}\`. Metrics: namespace \`${this.telemetry.namespace}\`, ` +
          `dimension \`service=${this.telemetry.service}\`. Failed records: the failure queue (14 days).`,
        width: 24,
        height: 2,
      }),
    );
    dashboard.addWidgets(
      new GraphWidget({
        title: "Lag (ms)",
        width,
        left: [
          fn.metric("IteratorAge", {
            statistic: "Maximum",
            period: minute,
            label: "IteratorAge max",
          }),
          this.ownMetric(METRIC.streamLagMs, "Maximum", minute).with({
            label: "oldest record age",
          }),
        ],
        leftAnnotations: [
          {
            value: VIP_ALLOCATOR_DEFAULTS.iteratorAgeAlarm.toMilliseconds(),
            label: "alarm",
          },
        ],
      }),
      new GraphWidget({
        title: "Invocations, errors, throttles",
        width,
        left: [
          fn.metricInvocations({ period: minute }),
          fn.metricErrors({ period: minute }),
          fn.metricThrottles({ period: minute }),
        ],
      }),
      new GraphWidget({
        title: "Duration (ms)",
        width,
        left: [
          fn.metricDuration({ statistic: "p50", period: minute }),
          fn.metricDuration({ statistic: "p99", period: minute }),
          fn.metricDuration({ statistic: "Maximum", period: minute }),
        ],
        leftAnnotations: [
          { value: this.function.timeout?.toMilliseconds() ?? 0, label: "timeout" },
        ],
      }),
    );
    dashboard.addWidgets(
      new GraphWidget({
        title: "Allocations and releases",
        width,
        left: [
          sum(METRIC.allocations).with({ label: "allocations" }),
          sum(METRIC.releases).with({ label: "releases (into quarantine)" }),
          sum(METRIC.reclaims).with({ label: "reclaims (after quarantine)" }),
          sum(METRIC.renumbered).with({ label: "renumbered (outside range)" }),
        ],
      }),
      new GraphWidget({
        title: "Pool use (%)",
        width,
        left: [this.ownMetric(METRIC.poolUsedPercent, "Maximum", minute).with({ label: "used" })],
        leftYAxis: { min: 0, max: 100 },
        leftAnnotations: [{ value: VIP_ALLOCATOR_DEFAULTS.poolUsedPercentAlarm, label: "alarm" }],
        right: [sum(METRIC.exhausted).with({ label: "exhausted (services without a VIP)" })],
      }),
      new GraphWidget({
        title: "VIP item size (bytes)",
        width,
        left: [
          this.ownMetric(METRIC.itemBytes, "Maximum", minute).with({ label: "max" }),
          this.ownMetric(METRIC.itemBytes, "Average", minute).with({ label: "average" }),
        ],
        leftAnnotations: [{ value: 400 * 1024, label: "DynamoDB item limit" }],
        right: [sum(METRIC.itemTooLarge).with({ label: "items too large (not written)" })],
      }),
    );
    dashboard.addWidgets(
      new GraphWidget({
        title: "Writes, conflicts, bad input",
        width,
        left: [
          sum(METRIC.meshWrites).with({ label: "mesh writes" }),
          sum(METRIC.conflicts).with({ label: "version conflicts" }),
          sum(METRIC.badInput).with({ label: "bad input skipped" }),
          sum(METRIC.meshFailures).with({ label: "meshes failed" }),
        ],
      }),
      new GraphWidget({
        title: "Event sources and failure queue",
        width,
        left: [
          esmMetric(this.meshesEventSource, "PolledEventCount", "meshes polled"),
          esmMetric(this.dataplanesEventSource, "PolledEventCount", "dataplanes polled"),
          new MathExpression({
            expression: "m + d",
            usingMetrics: {
              m: esmMetric(this.meshesEventSource, "DroppedEventCount", "meshes dropped"),
              d: esmMetric(this.dataplanesEventSource, "DroppedEventCount", "dataplanes dropped"),
            },
            label: "dropped to the failure queue",
            period: minute,
          }),
        ],
        right: [
          this.failureQueue.metricApproximateNumberOfMessagesVisible({
            statistic: "Maximum",
            period: minute,
            label: "failure queue depth",
          }),
        ],
      }),
      new GraphWidget({
        title: "Repair sweep",
        width,
        left: [
          new MathExpression({
            expression:
              `SEARCH('{${this.telemetry.namespace},service,${SWEEP_REPAIR_DIMENSION}} ` +
              `MetricName="${METRIC.sweepRepairs}" service="${this.telemetry.service}"', 'Sum', ${this.sweepPeriod.toSeconds()})`,
            // A dynamic label: one series per kind of correction.
            label: `repairs: \${PROP('Dim.${SWEEP_REPAIR_DIMENSION}')}`,
            period: this.sweepPeriod,
          }),
          this.ownMetric(METRIC.sweepRepairs, "Sum", this.sweepPeriod).with({
            label: "repairs (all kinds)",
          }),
        ],
        right: [
          this.ownMetric(METRIC.sweepMeshes, "Sum", this.sweepPeriod).with({
            label: "meshes swept",
          }),
          this.ownMetric(METRIC.sweepCycles, "Sum", this.sweepPeriod).with({
            label: "cycles completed",
          }),
        ],
      }),
    );
    dashboard.addWidgets(
      new AlarmStatusWidget({
        title: "Alarms",
        width,
        alarms: Object.values(this.alarms),
      }),
    );
    return dashboard;
  }
}
