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
    this.logger.warn("sweep repair", { kind, ...data, ...(expected ? { backfill: true } : {}) });
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
    this.logger.info(message, data);
  }

  warn(message: string, data: Record<string, unknown> = {}): void {
    this.logger.warn(message, data);
  }

  error(message: string, data: Record<string, unknown> = {}): void {
    this.logger.error(message, data);
  }

  /** Emits the metrics gathered during one invocation. */
  flush(): void {
    if (this.metrics.hasStoredMetrics()) this.metrics.publishStoredMetrics();
  }
}
