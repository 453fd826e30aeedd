/**
 * Alarms that page only for real faults (issue 29, decision 132): every alarm's metric,
 * threshold, datapoints (M of N) and missing-data treatment; the sweep heartbeat, the item size
 * warning, a throttle alarm per table; a dashboard with every metric the function emits and
 * every event source.
 */
import { Duration } from "aws-cdk-lib";
import { describe, expect, test } from "vitest";
import { ITERATOR_AGE_TOLERANCE_SECONDS } from "../../functions/allocator/config.ts";
import { METRIC } from "../../functions/allocator/telemetry-names.ts";
import { logicalId, synth } from "./synth.ts";

type Props = Record<string, unknown>;

describe("the alarms", () => {
  const { template, allocator } = synth();
  const alarms = template.findResources("AWS::CloudWatch::Alarm");
  const props = (alarm: { node: { defaultChild?: unknown } } & object): Props => {
    const id = logicalId(alarm as never);
    const resource = alarms[id];
    if (resource === undefined) throw new Error(`no alarm ${id}`);
    return resource.Properties as Props;
  };
  const own = (metric: string) => ({
    Namespace: "VipAllocator",
    MetricName: metric,
    Dimensions: [{ Name: "service", Value: allocator.serviceName }],
  });
  const a = allocator.alarms;

  test("are 16 by default: 10 on the function, queue and own metrics, the heartbeat, 5 tables", () => {
    expect(Object.keys(alarms)).toHaveLength(16);
  });

  test("page at once where one datapoint is a fault", () => {
    const once = { EvaluationPeriods: 1, DatapointsToAlarm: 1 };
    expect(props(a.failureQueueDepth)).toMatchObject({
      ...once,
      MetricName: "ApproximateNumberOfMessagesVisible",
      Statistic: "Maximum",
      Period: 60,
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      TreatMissingData: "ignore",
    });
    expect(props(a.poolExhausted)).toMatchObject({
      ...once,
      ...own(METRIC.exhausted),
      Statistic: "Sum",
      Period: 300,
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
    });
    expect(props(a.itemTooLarge)).toMatchObject({
      ...once,
      ...own(METRIC.itemTooLarge),
      Statistic: "Sum",
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      TreatMissingData: "notBreaching",
    });
    expect(props(a.poolUsedPercent)).toMatchObject({
      ...once,
      ...own(METRIC.poolUsedPercent),
      Statistic: "Maximum",
      Threshold: 80,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "ignore",
    });
    expect(props(a.sweepRepairs)).toMatchObject({
      ...once,
      ...own(METRIC.sweepRepairs),
      Statistic: "Sum",
      Period: 15 * 60,
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
    });
  });

  test("need 3 of the last 5 minutes where one datapoint can be noise", () => {
    const threeOfFive = { EvaluationPeriods: 5, DatapointsToAlarm: 3, Period: 60 };
    expect(props(a.errors)).toMatchObject({
      ...threeOfFive,
      Namespace: "AWS/Lambda",
      MetricName: "Errors",
      Statistic: "Sum",
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
      TreatMissingData: "notBreaching",
    });
    expect(props(a.throttles)).toMatchObject({
      ...threeOfFive,
      Namespace: "AWS/Lambda",
      MetricName: "Throttles",
      Threshold: 1,
      TreatMissingData: "notBreaching",
    });
    expect(props(a.meshFailures)).toMatchObject({
      ...threeOfFive,
      ...own(METRIC.meshFailures),
      Statistic: "Sum",
      Threshold: 0,
      ComparisonOperator: "GreaterThanThreshold",
      TreatMissingData: "notBreaching",
    });
    // The iterator age: 5 of 5 minutes above the tolerance.
    expect(props(a.iteratorAge)).toMatchObject({
      Namespace: "AWS/Lambda",
      MetricName: "IteratorAge",
      Statistic: "Maximum",
      Period: 60,
      EvaluationPeriods: 5,
      DatapointsToAlarm: 5,
      Threshold: ITERATOR_AGE_TOLERANCE_SECONDS * 1000,
      TreatMissingData: "notBreaching",
    });
  });

  test("a heartbeat pages when no sweep cycle finished in four sweep periods (missing data breaches)", () => {
    expect(a.sweepHeartbeat).toBeDefined();
    expect(props(a.sweepHeartbeat as never)).toMatchObject({
      ...own(METRIC.sweepCycles),
      Statistic: "Sum",
      Period: 4 * 15 * 60,
      EvaluationPeriods: 1,
      Threshold: 1,
      ComparisonOperator: "LessThanThreshold",
      TreatMissingData: "breaching",
    });
    const { allocator: hourly, template: t } = synth({ sweepSchedule: Duration.hours(6) });
    expect(
      t.findResources("AWS::CloudWatch::Alarm")[logicalId(hourly.alarms.sweepHeartbeat as never)]
        ?.Properties.Period,
    ).toBe(24 * 3600);
    expect(synth({ sweepSchedule: false }).allocator.alarms.sweepHeartbeat).toBeUndefined();
  });

  test("an early warning when a written item passes the size chosen below 400 KB", () => {
    expect(props(a.itemSizeWarning)).toMatchObject({
      ...own(METRIC.itemBytes),
      Statistic: "Maximum",
      Threshold: 300 * 1024,
      ComparisonOperator: "GreaterThanThreshold",
      EvaluationPeriods: 1,
      TreatMissingData: "ignore",
    });
    const chosen = synth({ itemSizeWarningBytes: 200_000 }).allocator;
    expect(chosen.alarms.itemSizeWarning).toBeDefined();
    expect(() => synth({ itemSizeWarningBytes: 500_000 })).toThrow(
      /invalid itemSizeWarningBytes 500000: expected a whole number of bytes from 1024 to 409600/,
    );
  });

  test("one throttle alarm per table: read + write throttle events in 3 of 5 minutes", () => {
    const tables = {
      meshes: allocator.meshesTable,
      dataplanes: allocator.dataplanesTable,
      vips: allocator.vipsTable,
      claims: allocator.claimsTable,
      index: allocator.indexTable,
    };
    expect(Object.keys(a.tableThrottles).sort()).toEqual(Object.keys(tables).sort());
    for (const [name, table] of Object.entries(tables)) {
      const alarm = props(a.tableThrottles[name as keyof typeof tables]);
      expect(alarm, name).toMatchObject({
        EvaluationPeriods: 5,
        DatapointsToAlarm: 3,
        Threshold: 0,
        ComparisonOperator: "GreaterThanThreshold",
        TreatMissingData: "notBreaching",
      });
      const metrics = alarm.Metrics as {
        Expression?: string;
        MetricStat?: { Metric: { MetricName: string; Dimensions: unknown[] }; Period: number };
      }[];
      expect(metrics.find((m) => m.Expression)?.Expression).toBe("FILL(r0, 0) + FILL(w0, 0)");
      const stats = metrics.flatMap((m) => (m.MetricStat ? [m.MetricStat] : []));
      expect(stats.map((s) => s.Metric.MetricName).sort()).toEqual([
        "ReadThrottleEvents",
        "WriteThrottleEvents",
      ]);
      for (const stat of stats) {
        expect(stat.Period).toBe(60);
        expect(stat.Metric.Dimensions).toEqual([
          { Name: "TableName", Value: { Ref: logicalId(table) } },
        ]);
      }
    }
    const external = synth({ externalServices: true }).allocator;
    expect(external.alarms.tableThrottles.externalServices).toBeDefined();
  });

  test("runbook texts say what is true: a backfill's corrections and in-flight drift do not page", () => {
    const repairs = String(props(a.sweepRepairs).AlarmDescription);
    expect(repairs).not.toMatch(/expected once after a backfill/i);
    expect(repairs).toMatch(/backfill's corrections/);
    expect(repairs).toMatch(/in flight/);
    expect(String(props(a.errors).AlarmDescription)).toMatch(/3 of the last 5 minutes/);
  });
});

describe("the dashboard", () => {
  const { template } = synth({ externalServices: true });
  const body = JSON.stringify(template.findResources("AWS::CloudWatch::Dashboard"));

  test("shows every metric the function emits", () => {
    for (const metric of Object.values(METRIC)) {
      expect(body, `dashboard shows ${metric}`).toContain(`\\"${metric}\\"`);
    }
  });

  test("shows every event source, the failure queue, each table's throttling and every alarm", () => {
    const mappings = Object.keys(template.findResources("AWS::Lambda::EventSourceMapping"));
    expect(mappings).toHaveLength(3);
    for (const id of mappings) expect(body, id).toContain(id);
    for (const label of ["meshes polled", "dataplanes polled", "external services polled"]) {
      expect(body, label).toContain(label);
    }
    expect(body).toContain("ApproximateNumberOfMessagesVisible");
    expect(body).toContain("ReadThrottleEvents");
    expect(body).toContain("WriteThrottleEvents");
    for (const name of Object.keys(template.findResources("AWS::CloudWatch::Alarm"))) {
      expect(body, name).toContain(name);
    }
  });
});
