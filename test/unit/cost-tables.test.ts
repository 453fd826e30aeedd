/**
 * The cost tables of docs/measurements.md are generated (scripts/cost-tables.ts) from the
 * committed bench results, not typed by hand: the docs hold exactly the script's output, and the
 * standing-still inventory the script prices is what the construct creates.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { METRIC } from "../../functions/allocator/telemetry-names.ts";
import {
  batchingWindowTable,
  costTables,
  documentedTables,
  documentedWindowTable,
  FIXED,
} from "../../scripts/cost-tables.ts";
import { synth } from "../infra/synth.ts";

describe("the cost tables", () => {
  it("in docs/measurements.md are the script's output (npm run docs:costs)", () => {
    const doc = readFileSync(new URL("../../docs/measurements.md", import.meta.url), "utf8");
    expect(documentedTables(doc)).toBe(costTables());
  });

  it("in docs/deploy.md's batching-window section are the script's output too", () => {
    const doc = readFileSync(new URL("../../docs/deploy.md", import.meta.url), "utf8");
    expect(documentedWindowTable(doc)).toBe(batchingWindowTable());
  });

  it("price what an allocator with default props creates", () => {
    const { template } = synth();
    const alarms = Object.values(template.findResources("AWS::CloudWatch::Alarm"));
    const single = alarms.filter((a) => a.Properties.Metrics === undefined);
    const math = alarms.filter((a) => a.Properties.Metrics !== undefined);
    expect(single).toHaveLength(FIXED.singleMetricAlarms);
    expect(math).toHaveLength(FIXED.twoMetricAlarms);
    for (const alarm of math) {
      const stats = (alarm.Properties.Metrics as { MetricStat?: unknown }[]).filter(
        (m) => m.MetricStat,
      );
      expect(stats).toHaveLength(2);
    }
    template.resourceCountIs("AWS::CloudWatch::Dashboard", FIXED.dashboards);
    template.resourceCountIs("AWS::KMS::Key", FIXED.kmsKeys);
    expect(Object.values(METRIC)).toHaveLength(FIXED.metricSeries);
  });
});
