import type { InputIssue } from "../domain/errors.ts";
import type { MetricName } from "./telemetry-names.ts";

export type MetricUnitName = "Count" | "Percent" | "Bytes" | "Milliseconds";

/**
 * What the application step reports. The Lambda entry backs it with Powertools Logger and
 * Metrics; tests use a recording implementation.
 */
export interface Telemetry {
  metric(name: MetricName, unit: MetricUnitName, value: number): void;
  /**
   * One structured line per correction the repair sweep made, and the `SweepRepairs` metric
   * with the `kind` dimension, and (what the alarm watches) without it unless `expected` (a
   * backfill's corrections are its purpose, not a sign that the event path missed something).
   */
  repair(kind: string, data: Record<string, unknown>, expected?: boolean): void;
  /** One structured line per skipped piece of bad input, naming table, key, field, reason. */
  badInput(issue: InputIssue): void;
  info(message: string, data?: Record<string, unknown>): void;
  warn(message: string, data?: Record<string, unknown>): void;
  error(message: string, data?: Record<string, unknown>): void;
  /** Called once at the end of each invocation (e.g. to publish metrics). */
  flush?(): void;
}
