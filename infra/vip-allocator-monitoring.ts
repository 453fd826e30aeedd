import { Duration } from "aws-cdk-lib";
import {
  AlarmStatusWidget,
  Dashboard,
  GraphWidget,
  type IAlarmAction,
  MathExpression,
  Metric,
  TextWidget,
} from "aws-cdk-lib/aws-cloudwatch";
import type { ITableV2 } from "aws-cdk-lib/aws-dynamodb";
import type { Function as LambdaFunction } from "aws-cdk-lib/aws-lambda";
import type { DynamoEventSource } from "aws-cdk-lib/aws-lambda-event-sources";
import type { Queue } from "aws-cdk-lib/aws-sqs";
import { Construct } from "constructs";
import { ITERATOR_AGE_TOLERANCE_SECONDS } from "../functions/allocator/config.ts";
import { METRIC, SWEEP_REPAIR_DIMENSION } from "../functions/allocator/telemetry-names.ts";
import type { VipAllocator } from "./vip-allocator.ts";
import {
  type AlarmSources,
  allAlarms,
  createAlarms,
  ownMetric,
  tableThrottleMetric,
  type VipAllocatorAlarms,
} from "./vip-allocator-alarms.ts";
import { type ResolvedProps, VIP_ALLOCATOR_DEFAULTS } from "./vip-allocator-props.ts";

export type { VipAllocatorAlarms, VipAllocatorTableAlarms } from "./vip-allocator-alarms.ts";

/** The monitoring of `allocator`: its function, queue, event sources and tables. */
export function monitorAllocator(
  allocator: VipAllocator,
  resolved: ResolvedProps,
  alarmActions: readonly IAlarmAction[],
): VipAllocatorMonitoring {
  const tables = {
    meshes: allocator.meshesTable,
    dataplanes: allocator.dataplanesTable,
    externalServices: allocator.externalServicesTable,
    vips: allocator.vipsTable,
    claims: allocator.claimsTable,
    index: allocator.indexTable,
  };
  const external = allocator.externalServicesEventSource;
  return new VipAllocatorMonitoring(allocator, "Monitoring", {
    function: allocator.function,
    failureQueue: allocator.failureQueue,
    eventSources: [
      { label: "meshes", source: allocator.meshesEventSource },
      { label: "dataplanes", source: allocator.dataplanesEventSource },
      ...(external ? [{ label: "external services", source: external }] : []),
    ],
    tables,
    tablesInOrder: Object.entries(tables).filter(
      (entry): entry is [string, ITableV2] => entry[1] !== undefined,
    ),
    vipCidr: allocator.vipCidr,
    telemetry: { namespace: resolved.metricsNamespace, service: resolved.serviceName },
    alarmActions,
    sweepSchedule: resolved.sweepSchedule,
    itemSizeWarningBytes: resolved.itemSizeWarningBytes,
  });
}

export interface VipAllocatorMonitoringProps extends AlarmSources {
  /** The event sources, each with its input table's name for the graphs. */
  readonly eventSources: readonly { readonly label: string; readonly source: DynamoEventSource }[];
  readonly vipCidr: string;
  readonly alarmActions: readonly IAlarmAction[];
  /** The tables for the throttle graph, labelled. */
  readonly tablesInOrder: readonly (readonly [string, ITableV2])[];
}

/**
 * The allocator's alarms (vip-allocator-alarms.ts) and its dashboard: every metric the function
 * emits, every event source, every table's throttling, and the alarms' states.
 */
export class VipAllocatorMonitoring extends Construct {
  readonly alarms: VipAllocatorAlarms;
  readonly dashboard: Dashboard;
  private readonly function: LambdaFunction;
  private readonly failureQueue: Queue;
  private readonly props: VipAllocatorMonitoringProps;
  private readonly vipCidr: string;
  private readonly telemetry: { readonly namespace: string; readonly service: string };
  private readonly sweepPeriod: Duration;

  constructor(scope: Construct, id: string, props: VipAllocatorMonitoringProps) {
    super(scope, id);
    this.props = props;
    this.function = props.function;
    this.failureQueue = props.failureQueue;
    this.vipCidr = props.vipCidr;
    this.telemetry = props.telemetry;
    this.sweepPeriod = props.sweepSchedule ?? VIP_ALLOCATOR_DEFAULTS.sweepSchedule;
    this.alarms = createAlarms(this, props, props.alarmActions);
    this.dashboard = this.createDashboard();
  }

  private ownMetric(metricName: string, statistic: string, period = Duration.minutes(5)): Metric {
    return ownMetric(this.telemetry, metricName, statistic, period);
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
    const sources = this.props.eventSources;
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
            value: ITERATOR_AGE_TOLERANCE_SECONDS * 1000,
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
        leftAnnotations: [
          { value: 400 * 1024, label: "DynamoDB item limit" },
          { value: this.props.itemSizeWarningBytes, label: "size warning" },
        ],
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
        right: [
          sum(METRIC.indexWrites).with({ label: "index records written" }),
          sum(METRIC.passesSkipped).with({ label: "passes skipped (no presence changed)" }),
          sum(METRIC.passesContinued).with({ label: "passes continued (out of time)" }),
        ],
      }),
      new GraphWidget({
        title: "Event sources and failure queue",
        width,
        left: [
          ...sources.map(({ label, source }) =>
            esmMetric(source, "PolledEventCount", `${label} polled`),
          ),
          new MathExpression({
            expression: sources.map((_, i) => `FILL(d${i}, 0)`).join(" + "),
            usingMetrics: Object.fromEntries(
              sources.map(({ label, source }, i) => [
                `d${i}`,
                esmMetric(source, "DroppedEventCount", `${label} dropped`),
              ]),
            ),
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
          this.ownMetric(METRIC.sweepInFlight, "Sum", this.sweepPeriod).with({
            label: "in flight (not counted)",
          }),
        ],
      }),
    );
    dashboard.addWidgets(
      new GraphWidget({
        title: "Table throttle events (read + write)",
        width: 16,
        left: this.props.tablesInOrder.map(([label, table], i) =>
          tableThrottleMetric(table, label, i),
        ),
      }),
    );
    dashboard.addWidgets(
      new AlarmStatusWidget({
        title: "Alarms",
        width,
        alarms: allAlarms(this.alarms),
      }),
    );
    return dashboard;
  }
}
