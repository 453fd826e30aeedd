import { Logger } from "@aws-lambda-powertools/logger";
import { Metrics, MetricUnit } from "@aws-lambda-powertools/metrics";
import type { InputIssue } from "../domain/errors.ts";
import type { MetricUnitName, Telemetry } from "./telemetry.ts";
import {
  METRIC,
  METRICS_NAMESPACE,
  type MetricName,
  SERVICE_NAME,
  SWEEP_REPAIR_DIMENSION,
} from "./telemetry-names.ts";

const UNITS: Record<MetricUnitName, (typeof MetricUnit)[keyof typeof MetricUnit]> = {
  Count: MetricUnit.Count,
  Percent: MetricUnit.Percent,
  Bytes: MetricUnit.Bytes,
  Milliseconds: MetricUnit.Milliseconds,
};

/**
 * The keys Powertools Logger reserves for every log line (its `ReservedKeys`, checked against
 * the installed version by test/unit/powertools-log-keys.test.ts): a custom attribute with one
 * of these names is dropped with a warning ("The key ... is a reserved key and will be
 * dropped"). The allocator's fields never use them (a mesh's service is `kumaService`); should
 * one slip in, {@link logFields} keeps its value under `data_<key>` instead of losing it.
 */
export const POWERTOOLS_RESERVED_KEYS: ReadonlySet<string> = new Set([
  "level",
  "message",
  "sampling_rate",
  "service",
  "timestamp",
]);

/** `data` with any key Powertools reserves renamed to `data_<key>` (nothing is dropped). */
export function logFields(data: Record<string, unknown>): Record<string, unknown> {
  const fields: Record<string, unknown> = Object.create(null);
  for (const [key, value] of Object.entries(data)) {
    fields[POWERTOOLS_RESERVED_KEYS.has(key) ? `data_${key}` : key] = value;
  }
  return fields;
}

/** Telemetry backed by Powertools: structured JSON logs and EMF metrics. */
export class PowertoolsTelemetry implements Telemetry {
  readonly logger: Logger;
  readonly metrics: Metrics;

  constructor(options: { logger?: Logger; metrics?: Metrics } = {}) {
    // The construct sets both per allocator (props serviceName, metricsNamespace); these
    // defaults are its defaults.
    const serviceName = process.env.POWERTOOLS_SERVICE_NAME || SERVICE_NAME;
    const namespace = process.env.POWERTOOLS_METRICS_NAMESPACE || METRICS_NAMESPACE;
    this.logger = options.logger ?? new Logger({ serviceName });
    this.metrics = options.metrics ?? new Metrics({ namespace, serviceName });
  }

  metric(name: MetricName, unit: MetricUnitName, value: number): void {
    this.metrics.addMetric(name, UNITS[unit], value);
  }

  repair(kind: string, data: Record<string, unknown>, expected = false): void {
    this.logger.warn(
      "sweep repair",
      logFields({ kind, ...data, ...(expected ? { backfill: true } : {}) }),
    );
    if (!expected) this.metrics.addMetric(METRIC.sweepRepairs, MetricUnit.Count, 1);
    const single = this.metrics.singleMetric();
    single.addDimension(SWEEP_REPAIR_DIMENSION, kind);
    single.addMetric(METRIC.sweepRepairs, MetricUnit.Count, 1);
  }

  badInput(issue: InputIssue): void {
    this.logger.warn("bad input skipped", {
      table: issue.table,
      key: issue.key,
      field: issue.field,
      reason: issue.reason,
    });
    this.metrics.addMetric(METRIC.badInput, MetricUnit.Count, 1);
  }

  info(message: string, data: Record<string, unknown> = {}): void {
    this.logger.info(message, logFields(data));
  }

  warn(message: string, data: Record<string, unknown> = {}): void {
    this.logger.warn(message, logFields(data));
  }

  error(message: string, data: Record<string, unknown> = {}): void {
    this.logger.error(message, logFields(data));
  }

  /** Emits the metrics gathered during one invocation. */
  flush(): void {
    if (this.metrics.hasStoredMetrics()) this.metrics.publishStoredMetrics();
  }
}
