/**
 * The alarms of the synthesized template evaluated on datapoints (issue 29): each alarm's metric,
 * statistic, period, threshold, M of N and missing-data treatment as CloudFormation would give
 * them to CloudWatch, applied to the datapoints a soak run emitted, minute by minute.
 */
import type { Template } from "aws-cdk-lib/assertions";
import type { VipAllocator } from "../../infra/vip-allocator.ts";
import { logicalId } from "../infra/synth.ts";

/** One datapoint: a series (see {@link seriesOf}), a value and its (virtual) time. */
export interface Datapoint {
  readonly series: string;
  readonly value: number;
  readonly at: number;
}

export interface AlarmDefinition {
  readonly id: string;
  /** The series summed (math alarms: the sum of FILL(x, 0) over their metrics). */
  readonly series: readonly string[];
  readonly statistic: string;
  readonly periodMs: number;
  readonly evaluationPeriods: number;
  readonly datapointsToAlarm: number;
  readonly threshold: number;
  readonly comparison: string;
  readonly missing: string;
}

type Props = Record<string, unknown>;

/**
 * The series a metric of the template names: `own:<MetricName>` (the function's metrics with
 * only the `service` dimension), `lambda:<MetricName>`, `sqs:depth`, `throttle:<table key>`.
 */
function seriesOf(metric: Props, tables: ReadonlyMap<string, string>): string {
  const namespace = String(metric.Namespace);
  const name = String(metric.MetricName);
  if (namespace === "AWS/Lambda") return `lambda:${name}`;
  if (namespace === "AWS/SQS") return "sqs:depth";
  if (namespace === "AWS/DynamoDB") {
    const [dimension] = metric.Dimensions as { Value: { Ref: string } }[];
    return `throttle:${tables.get(dimension?.Value.Ref ?? "") ?? "?"}`;
  }
  return `own:${name}`;
}

/** Every alarm of the allocator's stack, read from the synthesized template. */
export function alarmDefinitions(template: Template, allocator: VipAllocator): AlarmDefinition[] {
  const tables = new Map<string, string>([
    [logicalId(allocator.meshesTable), "meshes"],
    [logicalId(allocator.dataplanesTable), "dataplanes"],
    [logicalId(allocator.vipsTable), "vips"],
    [logicalId(allocator.claimsTable), "claims"],
    [logicalId(allocator.indexTable), "index"],
  ]);
  return Object.entries(template.findResources("AWS::CloudWatch::Alarm")).map(([id, r]) => {
    const p = r.Properties as Props;
    const common = {
      id,
      evaluationPeriods: Number(p.EvaluationPeriods),
      datapointsToAlarm: Number(p.DatapointsToAlarm ?? p.EvaluationPeriods),
      threshold: Number(p.Threshold),
      comparison: String(p.ComparisonOperator),
      missing: String(p.TreatMissingData ?? "missing"),
    };
    if (p.Metrics === undefined) {
      return {
        ...common,
        series: [seriesOf(p, tables)],
        statistic: String(p.Statistic),
        periodMs: Number(p.Period) * 1000,
      };
    }
    const stats = (
      p.Metrics as { MetricStat?: { Metric: Props; Period: number; Stat: string } }[]
    ).flatMap((m) => (m.MetricStat ? [m.MetricStat] : []));
    return {
      ...common,
      series: stats.map((stat) => seriesOf(stat.Metric, tables)),
      statistic: stats[0]?.Stat ?? "Sum",
      periodMs: (stats[0]?.Period ?? 60) * 1000,
    };
  });
}

function aggregate(values: readonly number[], statistic: string): number {
  if (statistic === "Maximum") return Math.max(...values);
  if (statistic === "Minimum") return Math.min(...values);
  const sum = values.reduce((a, b) => a + b, 0);
  return statistic === "Average" ? sum / values.length : sum;
}

function breaches(value: number, alarm: AlarmDefinition): boolean {
  switch (alarm.comparison) {
    case "GreaterThanThreshold":
      return value > alarm.threshold;
    case "GreaterThanOrEqualToThreshold":
      return value >= alarm.threshold;
    case "LessThanThreshold":
      return value < alarm.threshold;
    case "LessThanOrEqualToThreshold":
      return value <= alarm.threshold;
    default:
      throw new Error(`comparison ${alarm.comparison} not modelled`);
  }
}

export interface AlarmRun {
  /** Minute boundaries (ms from the start) at which the alarm was in ALARM. */
  readonly alarmAt: readonly number[];
  /** The state at the end. */
  readonly final: "OK" | "ALARM";
}

/**
 * The alarm's state at every minute boundary from the first whole evaluation range on, from
 * `start` to `end` (CloudWatch evaluates once a minute over the last N periods). A period with no
 * datapoint is missing: `notBreaching` counts it as good, `breaching` as bad, `ignore` keeps the
 * state while every period is missing and otherwise evaluates the periods that have data.
 */
export function evaluate(
  alarm: AlarmDefinition,
  points: readonly Datapoint[],
  start: number,
  end: number,
): AlarmRun {
  const wanted = new Set(alarm.series);
  const mine = points.filter((p) => wanted.has(p.series));
  const math = alarm.series.length > 1;
  const alarmAt: number[] = [];
  let state: "OK" | "ALARM" = "OK";
  const range = alarm.periodMs * alarm.evaluationPeriods;
  for (let t = start + range; t <= end; t += 60_000) {
    let bad = 0;
    let present = 0;
    for (let i = alarm.evaluationPeriods; i >= 1; i--) {
      const from = t - i * alarm.periodMs;
      const values = mine.filter((p) => p.at >= from && p.at < from + alarm.periodMs);
      if (values.length === 0 && !math) {
        if (alarm.missing === "breaching") bad++;
        continue;
      }
      present++;
      // A math alarm's FILL(x, 0): an empty period is 0.
      const value =
        values.length === 0
          ? 0
          : aggregate(
              values.map((v) => v.value),
              alarm.statistic,
            );
      if (breaches(value, alarm)) bad++;
    }
    if (alarm.missing === "ignore" && present === 0) {
      // Keeps the state it had.
    } else state = bad >= alarm.datapointsToAlarm ? "ALARM" : "OK";
    if (state === "ALARM") alarmAt.push(t - start);
  }
  return { alarmAt, final: state };
}
