/**
 * The range-change bench's chart (bench/range-change.ts): services in the new range over the
 * run's wall time, one series per run. Also runnable on a committed result to draw it again:
 *
 *   npx tsx bench/range-change-chart.ts bench/results/range-change-20000.json
 */
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { renderChart } from "./svg-chart.ts";

export interface ProgressRun {
  readonly timeoutSeconds: number | null;
  readonly invocations: number;
  readonly progress: ReadonlyArray<{ readonly seconds: number; readonly moved: number }>;
}

export function rangeChangeChart(services: number, runs: readonly ProgressRun[]): string {
  return renderChart({
    title: `Range change of one mesh of ${services.toLocaleString("en")} services`,
    xLabel: "wall seconds since the run's start",
    yLabel: "services in the new range",
    series: runs.map((r) => ({
      name: `${r.timeoutSeconds === null ? "first pass, no limit" : `timeout ${r.timeoutSeconds} s`} (${r.invocations} inv.)`,
      points: r.progress
        .filter((p) => p.seconds > 0 && p.moved > 0)
        .map((p) => ({ x: p.seconds, y: p.moved })),
    })),
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = process.argv[2] ?? "bench/results/range-change-20000.json";
  const runs = JSON.parse(readFileSync(path, "utf8")) as ProgressRun[];
  const services = Number(/range-change-(\d+)/.exec(path)?.[1] ?? 0);
  writeFileSync(path.replace(/\.json$/, ".svg"), rangeChangeChart(services, runs));
}
