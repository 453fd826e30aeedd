/**
 * `npm run docs:costs`: the cost tables of docs/measurements.md ("What it costs in money"),
 * generated from the committed bench results (bench/results/event-cost.json,
 * event-cost-100000.json, sweep-cost.json, backfill-*-metered.json)
 * and the prices below, written between the markers `<!-- cost-tables:begin -->` and
 * `<!-- cost-tables:end -->`. test/unit/cost-tables.test.ts checks that the docs hold exactly
 * this output. Nothing here is measured; every unit comes from the results files.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * List prices, us-east-1, as the repository uses them (AWS's public pricing pages for DynamoDB
 * on-demand, CloudWatch, KMS and CloudWatch Logs, as of 2026-12-04; not fetched by this script).
 */
export const PRICES = {
  date: "2026-12-04",
  region: "us-east-1",
  /** DynamoDB on-demand, $ per million write request units / read request units. */
  perMillionWriteUnits: 0.625,
  perMillionReadUnits: 0.125,
  /** CloudWatch custom metric (first 10,000), $ per metric series per month. */
  perMetricSeriesMonth: 0.3,
  /** CloudWatch standard-resolution alarm, $ per metric it evaluates per month. */
  perAlarmMetricMonth: 0.1,
  /** CloudWatch dashboard, $ per month (beyond an account's 3 free ones). */
  perDashboardMonth: 3,
  /** KMS customer-managed key, $ per month (requests: $0.03 per 10,000). */
  perKmsKeyMonth: 1,
  /** CloudWatch Logs ingestion, $ per GB. */
  perLogGb: 0.5,
} as const;

/** Seconds in the month the tables use (30 days). */
const MONTH_S = 2_592_000;

/**
 * What an allocator with default props has standing still (counted from the construct, see the
 * test): the function's metric series that are emitted at least hourly with the sweep alone or
 * with any traffic, alarms (a throttle alarm evaluates two metrics), one dashboard, the alarm
 * topic's KMS key, and the log lines of the sweep's invocations (every 15 minutes).
 */
export const FIXED = {
  metricSeries: 20,
  singleMetricAlarms: 11,
  twoMetricAlarms: 5,
  dashboards: 1,
  kmsKeys: 1,
  sweepInvocationsPerMonth: MONTH_S / 900,
  /** Bytes logged per sweep invocation: Lambda's START/END/REPORT lines and two JSON lines. */
  logBytesPerSweepInvocation: 1_000,
} as const;

interface KindCost {
  kind: string;
  setChanging: boolean;
  readUnitsPerEvent: number;
  writeUnitsPerEvent: number;
}
interface EventCost {
  dataplanes: number;
  mode: string;
  delivery: string;
  kinds: KindCost[];
}
interface SweepCost {
  dataplanes: number;
  meshes: number;
  detection: string;
  readUnits: number;
  writeUnits: number;
}

const usd = (value: number, digits = 2) =>
  `$${value.toFixed(value > 0 && value < 0.01 ? 4 : digits)}`;
const perMillion = (read: number, write: number) =>
  read * PRICES.perMillionReadUnits + write * PRICES.perMillionWriteUnits;

function table(header: string[], align: ("l" | "r")[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const cell = (text: string, i: number) =>
    align[i] === "r" ? text.padStart(widths[i] ?? 0) : text.padEnd(widths[i] ?? 0);
  const line = (cells: string[]) => `| ${cells.map(cell).join(" | ")} |`;
  const rule = `| ${widths.map((w, i) => (align[i] === "r" ? `${"-".repeat(w - 1)}:` : "-".repeat(w))).join(" | ")} |`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

/** Units per event of a share `s` of set-changing events, the rest an even mix of the others. */
function mix(run: EventCost, share: number): { read: number; write: number } {
  const changing = run.kinds.filter((k) => k.setChanging);
  const other = run.kinds.filter((k) => !k.setChanging);
  const mean = (kinds: KindCost[], pick: (k: KindCost) => number) =>
    kinds.reduce((a, k) => a + pick(k), 0) / kinds.length;
  return {
    read:
      share * mean(changing, (k) => k.readUnitsPerEvent) +
      (1 - share) * mean(other, (k) => k.readUnitsPerEvent),
    write:
      share * mean(changing, (k) => k.writeUnitsPerEvent) +
      (1 - share) * mean(other, (k) => k.writeUnitsPerEvent),
  };
}

/** The event-cost results this model uses: up to 10,000 dataplanes, and at 100,000. */
const EVENT_RESULTS = ["event-cost.json", "event-cost-100000.json"] as const;

function eventResults<T extends EventCost>(): T[] {
  return EVENT_RESULTS.flatMap(
    (file) => JSON.parse(readFileSync(`${root}bench/results/${file}`, "utf8")) as T[],
  );
}

/** The markdown between the markers. */
export function costTables(): string {
  const events = eventResults<EventCost>();
  const sweeps = JSON.parse(
    readFileSync(`${root}bench/results/sweep-cost.json`, "utf8"),
  ) as SweepCost[];
  const runs = events.filter((r) => r.mode === "index");
  const sizes = [...new Set(runs.map((r) => r.dataplanes))].sort((a, b) => a - b);
  const run = (size: number, delivery: string) => {
    const found = runs.find((r) => r.dataplanes === size && r.delivery === delivery);
    if (!found) throw new Error(`bench/results/event-cost*.json: no ${delivery} run at ${size}`);
    return found;
  };
  const largest = sizes.at(-1) ?? 0;
  const out: string[] = [];
  out.push(
    `Prices: ${PRICES.region} list prices as of ${PRICES.date}: DynamoDB on-demand ` +
      `$${PRICES.perMillionWriteUnits} per million write units and $${PRICES.perMillionReadUnits} ` +
      `per million read units; CloudWatch $${PRICES.perMetricSeriesMonth} per custom metric series ` +
      `and month, $${PRICES.perAlarmMetricMonth} per alarm metric and month, ` +
      `$${PRICES.perDashboardMonth} per dashboard and month; KMS $${PRICES.perKmsKeyMonth} per key ` +
      `and month; CloudWatch Logs $${PRICES.perLogGb} per GB ingested. A month is ${MONTH_S.toLocaleString("en-US")} s.`,
    "",
    "Units per event by kind, one record per invocation (`single`) and batches of 100 (`batch100`), measured (bench/results/event-cost.json, event-cost-100000.json):",
    "",
  );
  const kindRows: string[][] = [];
  for (const size of sizes) {
    for (const delivery of ["single", "batch100"]) {
      for (const kind of run(size, delivery).kinds) {
        kindRows.push([
          size.toLocaleString("en-US"),
          delivery,
          `${kind.kind}${kind.setChanging ? " (set-changing)" : ""}`,
          String(kind.readUnitsPerEvent),
          String(kind.writeUnitsPerEvent),
          usd(perMillion(kind.readUnitsPerEvent, kind.writeUnitsPerEvent)),
        ]);
      }
    }
  }
  out.push(
    table(
      ["dataplanes", "delivery", "kind", "read units", "write units", "$ per million"],
      ["r", "l", "l", "r", "r", "r"],
      kindRows,
    ),
    "",
    `How the bill moves with the share of set-changing events (new services; the rest an even mix of the other kinds), at ${largest.toLocaleString("en-US")} dataplanes:`,
    "",
  );
  const shareRows: string[][] = [];
  for (const share of [0, 0.02, 0.1, 0.5, 1]) {
    const row = [`${(share * 100).toFixed(0)}%`];
    for (const delivery of ["single", "batch100"]) {
      const units = mix(run(largest, delivery), share);
      const dollars = perMillion(units.read, units.write);
      row.push(usd(dollars), usd((dollars * MONTH_S) / 1e6), usd((dollars * 20 * MONTH_S) / 1e6));
    }
    shareRows.push(row);
  }
  out.push(
    table(
      [
        "set-changing",
        "single: $ / million",
        "1 event/s: $ / month",
        "20 events/s",
        "batch100: $ / million",
        "1 event/s",
        "20 events/s",
      ],
      ["r", "r", "r", "r", "r", "r", "r"],
      shareRows,
    ),
    "",
  );
  const first = mix(run(largest, "single"), 0);
  const all = mix(run(largest, "single"), 1);
  const slope = (perMillion(all.read, all.write) - perMillion(first.read, first.write)) / 100;
  out.push(
    `Each percentage point of set-changing events adds ${usd(slope, 3)} per million events (one record per invocation), ` +
      `${usd((slope * MONTH_S) / 1e6, 3)} a month at 1 event/s: the bill is linear in the share.`,
    "",
    "What an allocator costs standing still (default props; whatever the traffic):",
    "",
  );
  // The sweep was measured up to 10,000 dataplanes: its largest measurement, named as such.
  const sweepReads = sweeps
    .filter((s) => s.dataplanes <= largest && s.detection === "eventual")
    .sort((a, b) => b.dataplanes - a.dataplanes)[0];
  const logGb = (FIXED.sweepInvocationsPerMonth * FIXED.logBytesPerSweepInvocation) / 1e9;
  const fixedRows: [string, number][] = [
    [
      `custom metric series (${FIXED.metricSeries})`,
      FIXED.metricSeries * PRICES.perMetricSeriesMonth,
    ],
    [
      `alarms (${FIXED.singleMetricAlarms} of one metric, ${FIXED.twoMetricAlarms} table throttle alarms of two)`,
      (FIXED.singleMetricAlarms + 2 * FIXED.twoMetricAlarms) * PRICES.perAlarmMetricMonth,
    ],
    ["dashboard (1)", FIXED.dashboards * PRICES.perDashboardMonth],
    ["KMS key of the alarm topic (1)", FIXED.kmsKeys * PRICES.perKmsKeyMonth],
    [
      `log ingestion of the sweep's ${FIXED.sweepInvocationsPerMonth.toLocaleString("en-US")} invocations (about ${FIXED.logBytesPerSweepInvocation} bytes each, estimated)`,
      logGb * PRICES.perLogGb,
    ],
  ];
  if (sweepReads) {
    const cycles = FIXED.sweepInvocationsPerMonth;
    fixedRows.push([
      `repair sweep reads at ${sweepReads.dataplanes.toLocaleString("en-US")} dataplanes (${sweepReads.readUnits} read units a cycle, measured, every 15 minutes)`,
      (sweepReads.readUnits * cycles * PRICES.perMillionReadUnits) / 1e6,
    ]);
  }
  const total = fixedRows.reduce((a, [, v]) => a + v, 0);
  out.push(
    table(
      ["what", "$ per month"],
      ["l", "r"],
      [...fixedRows.map(([what, v]) => [what, usd(v)]), ["**total**", `**${usd(total)}**`]],
    ),
  );
  const backfill = backfillTable();
  if (backfill.length > 0) out.push("", ...backfill);
  const oneEvent = perMillion(
    mix(run(largest, "single"), 0.02).read,
    mix(run(largest, "single"), 0.02).write,
  );
  out.push(
    "",
    `At 1 event/s with 2% set-changing events the DynamoDB bill is ${usd((oneEvent * MONTH_S) / 1e6)} a month: ` +
      `the fixed ${usd(total)} is most of the bill until about ${Math.round(((total / oneEvent) * 1e6) / MONTH_S)} events/s.`,
  );
  return out.join("\n");
}

/**
 * The backfill onto existing tables, once per deployment: units measured with the cost meter
 * (bench/results/backfill-N-metered.json), per dataplane, and in dollars for 100,000.
 */
function backfillTable(): string[] {
  type Backfill = { dataplanes: number; meshes: number; readUnits: number; writeUnits: number };
  const runs = readdirSync(`${root}bench/results`)
    .filter((file) => /^backfill-\d+-metered\.json$/.test(file))
    .map((file) => JSON.parse(readFileSync(`${root}bench/results/${file}`, "utf8")) as Backfill)
    .sort((a, b) => a.dataplanes - b.dataplanes);
  if (runs.length === 0) return [];
  const rows = runs.map((r) => {
    const [read, write] = [r.readUnits / r.dataplanes, r.writeUnits / r.dataplanes];
    const dollars = usd((perMillion(read, write) * 100_000) / 1e6);
    const units = [r.readUnits, r.writeUnits].map((u) => Math.round(u).toLocaleString("en-US"));
    return [
      r.dataplanes.toLocaleString("en-US"),
      String(r.meshes),
      ...units,
      read.toFixed(2),
      write.toFixed(2),
      dollars,
    ];
  });
  const header = ["dataplanes", "meshes", "read units", "write units", "read / dataplane"];
  return [
    "The backfill onto existing tables, once per deployment (bench/results/backfill-N-metered.json; 10 dataplanes per service; the last column assumes the units grow with the dataplanes). An upper bound: the meter slows the run, so it takes more invocations than the function would, and each invocation scans the dataplanes table for ingresses again:",
    "",
    table([...header, "write / dataplane", "$ per 100,000 dataplanes"], Array(7).fill("r"), rows),
  ];
}

/**
 * docs/deploy.md's batching-window table: units per event of the event mix the bench measures,
 * at its largest size, modelled for a batch of _n_ records as a per-invocation part _A_/_n_
 * plus a per-event part _B_ through the two measured points (one record per invocation, and
 * batches of 100). Records per batch: the rate times the window (with no window, what arrives
 * in one 0.25 s poll), at least 1, at most 100.
 */
export function batchingWindowTable(): string {
  const events = eventResults<
    EventCost & { readUnitsPerEvent: number; writeUnitsPerEvent: number }
  >();
  const runs = events.filter((r) => r.mode === "index");
  const largest = Math.max(...runs.map((r) => r.dataplanes));
  const at = (delivery: string) => {
    const found = runs.find((r) => r.dataplanes === largest && r.delivery === delivery);
    if (!found) throw new Error(`bench/results/event-cost*.json: no ${delivery} run at ${largest}`);
    return found;
  };
  const single = at("single");
  const batch = at("batch100");
  // units(n) = A / n + B, through n = 1 and n = 100.
  const throughBothPoints = (one: number, hundred: number) => {
    const a = ((one - hundred) * 100) / 99;
    return { a, b: one - a };
  };
  const reads = throughBothPoints(single.readUnitsPerEvent, batch.readUnitsPerEvent);
  const writes = throughBothPoints(single.writeUnitsPerEvent, batch.writeUnitsPerEvent);
  const rows: string[][] = [];
  for (const rate of [1, 20]) {
    for (const window of [0, 1, 5, 10]) {
      const arriving = window === 0 ? rate * 0.25 : rate * window;
      const n = Math.min(100, Math.max(1, Math.round(arriving)));
      const latency =
        window === 0
          ? "0 s"
          : n === 100 && arriving > 100
            ? `${100 / rate} s (batch full)`
            : `${window} s`;
      rows.push([
        `${window} s`,
        String(rate),
        String(n),
        (reads.a / n + reads.b).toFixed(2),
        (writes.a / n + writes.b).toFixed(2),
        latency,
      ]);
    }
  }
  return [
    `Measured at ${largest.toLocaleString("en-US")} dataplanes (bench/results/event-cost*.json, the bench's mix of ` +
      `${single.kinds.length} kinds): one record per invocation ${single.readUnitsPerEvent} read + ` +
      `${single.writeUnitsPerEvent} write units per event, batches of 100 ${batch.readUnitsPerEvent} + ` +
      `${batch.writeUnitsPerEvent}; per-invocation part _A_ and per-event part _B_: reads ` +
      `_A_ = ${reads.a.toFixed(2)}, _B_ = ${reads.b.toFixed(2)}; writes _A_ = ${writes.a.toFixed(2)}, ` +
      `_B_ = ${writes.b.toFixed(2)}.`,
    "",
    table(
      [
        "window",
        "events/s",
        "records per invocation",
        "read units / event",
        "write units / event",
        "added latency (at most)",
      ],
      ["r", "r", "r", "r", "r", "r"],
      rows,
    ),
  ].join("\n");
}

const BEGIN = "<!-- cost-tables:begin -->";
const END = "<!-- cost-tables:end -->";
const WINDOW_BEGIN = "<!-- batching-window:begin -->";
const WINDOW_END = "<!-- batching-window:end -->";

/** `doc` with the block between the markers replaced by `block`. */
export function withTables(doc: string, block: string, begin = BEGIN, end = END): string {
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`markers ${begin} ... ${end} missing`);
  return `${doc.slice(0, from + begin.length)}\n${block}\n${doc.slice(to)}`;
}

/** The block between the markers as the docs have it. */
export function documentedTables(doc: string, begin = BEGIN, end = END): string {
  const from = doc.indexOf(begin);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`markers ${begin} ... ${end} missing`);
  return doc.slice(from + begin.length, to).trim();
}

/** docs/deploy.md's batching-window block as the docs have it. */
export const documentedWindowTable = (doc: string): string =>
  documentedTables(doc, WINDOW_BEGIN, WINDOW_END);

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = `${root}docs/measurements.md`;
  writeFileSync(path, withTables(readFileSync(path, "utf8"), costTables()));
  const deploy = `${root}docs/deploy.md`;
  writeFileSync(
    deploy,
    withTables(readFileSync(deploy, "utf8"), batchingWindowTable(), WINDOW_BEGIN, WINDOW_END),
  );
  process.stderr.write("[cost-tables] docs/measurements.md and docs/deploy.md updated\n");
}
