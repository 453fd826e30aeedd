/** The event-cost bench's report: bench/results/event-cost.{md,json,svg}. */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { toAttributeMap } from "../functions/store/attribute-values.ts";
import type { DataplaneItem } from "../test/fixtures/builders.ts";
import { itemSize } from "./capacity-units.ts";
import { kubernetesDataplane as dataplane } from "./kubernetes-dataplane.ts";
import { renderChart } from "./svg-chart.ts";

const DELIVERIES = ["single", "batch100"] as const;
type Delivery = (typeof DELIVERIES)[number];
type Mode = "index" | "tables";
type Kind = "tag-change" | "new-dataplane" | "new-service" | "delete";

export interface KindCost {
  kind: Kind;
  /** Whether the kind changes a service set (a new service): its item write grows with the mesh. */
  setChanging: boolean;
  events: number;
  readUnitsPerEvent: number;
  writeUnitsPerEvent: number;
  itemReadUnitsPerEvent: number;
  itemWriteUnitsPerEvent: number;
}

export interface Row {
  dataplanes: number;
  mode: Mode;
  delivery: Delivery;
  events: number;
  requestsPerEvent: number;
  readUnitsPerEvent: number;
  writeUnitsPerEvent: number;
  /** Of the write units: the VIP items' own writes (they grow with the mesh's services). */
  itemWriteUnitsPerEvent: number;
  /** Of the read units: the VIP items' own reads. */
  itemReadUnitsPerEvent: number;
  /** Per kind of event (each kind delivered and metered on its own). */
  kinds: KindCost[];
  /** Claims-table reads of address claims and the cursor, per new-service event. */
  addressSearchReadUnitsPerNewService: number;
  wallSecondsPerEvent: number;
  /**
   * Read units of the pass guard's reads (the `waiting` item and the touched meshes'
   * `range#<mesh>` records, one strongly consistent BatchGetItem per batch) per batch.
   */
  guardReadUnitsPerBatch?: number;
}

export interface ReportContext {
  readonly engineLabel: string;
  readonly engineName: string;
  readonly sizes: readonly number[];
  readonly fullUpTo: number;
  readonly fullSingleEvents: (n: number) => number;
}

function marshall(item: DataplaneItem) {
  return toAttributeMap(item as Record<string, unknown>);
}

/** The results' base name under bench/results (`BENCH_NAME`, default `event-cost`). */
const NAME = process.env.BENCH_NAME?.trim() || "event-cost";

export function report(results: Row[], context: ReportContext): void {
  const {
    engineLabel: ENGINE_LABEL,
    sizes: SIZES,
    fullUpTo: FULL_UP_TO,
    fullSingleEvents,
  } = context;
  const label = (r: Row) =>
    `${r.mode === "index" ? "incremental" : "full recompute"} | ${r.delivery === "single" ? "1 per invocation" : "batches of 100"}`;
  const header =
    "| dataplanes | mode | delivery | events | requests/event | read units/event | of which VIP item reads | write units/event | of which VIP item writes | address search read units/new service | pass guard read units/batch | wall s/event |";
  const table = [
    header,
    "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...results.map(
      (r) =>
        `| ${r.dataplanes} | ${label(r)} | ${r.events} | ${r.requestsPerEvent.toFixed(2)} | ${r.readUnitsPerEvent.toFixed(2)} | ${r.itemReadUnitsPerEvent.toFixed(2)} | ${r.writeUnitsPerEvent.toFixed(2)} | ${r.itemWriteUnitsPerEvent.toFixed(2)} | ${r.addressSearchReadUnitsPerNewService.toFixed(2)} | ${r.guardReadUnitsPerBatch?.toFixed(2) ?? "-"} | ${r.wallSecondsPerEvent.toFixed(4)} |`,
    ),
  ].join("\n");
  const byKind = [
    "| dataplanes | mode | delivery | kind | changes a service set | events | read units/event | of which VIP item reads | write units/event | of which VIP item writes | total units/event |",
    "|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ...results.flatMap((r) =>
      r.kinds.map(
        (k) =>
          `| ${r.dataplanes} | ${label(r)} | ${k.kind} | ${k.setChanging ? "yes" : "no"} | ${k.events} | ${k.readUnitsPerEvent.toFixed(2)} | ${k.itemReadUnitsPerEvent.toFixed(2)} | ${k.writeUnitsPerEvent.toFixed(2)} | ${k.itemWriteUnitsPerEvent.toFixed(2)} | ${(k.readUnitsPerEvent + k.writeUnitsPerEvent).toFixed(2)} |`,
      ),
    ),
  ].join("\n");
  console.log(table);
  console.log(byKind);
  mkdirSync("bench/results", { recursive: true });
  const machine = `${cpus().length} CPUs (${cpus()[0]?.model ?? "unknown"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${ENGINE_LABEL}, load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(" ")} at the end (the machine is shared: read wall times with it)`;
  writeFileSync(
    `bench/results/${NAME}.md`,
    [
      `# What one dataplane event costs (${SIZES.map((n) => n.toLocaleString("en")).join(", ")} dataplanes)`,
      "",
      `Run ${new Date().toISOString()} with \`npm run bench -- ${process.argv.slice(2).join(" ") || SIZES.join(",")}\` on ${machine}.`,
      "",
      `Dataplanes are the size Kuma stores on Kubernetes (${itemSize(marshall(dataplane("big", "dp-0", "svc-0")))} bytes as a DynamoDB item).`,
      "Capacity units are computed from item sizes as DynamoDB bills them (bench/cost-meter.ts),",
      "per event of the mix (tag change, new dataplane of an existing service, new service,",
      "delete of one of a service's ten dataplanes), each kind delivered and metered on its own.",
      `Wall time is on ${context.engineName}, from an unmetered delivery of the same kinds of`,
      "events (on other dataplanes) just before the metered one. The full",
      "recompute one record per invocation reads the whole mesh and table per event, so it runs",
      `only the first ${fullSingleEvents(1000)} events of the mix at 1,000 dataplanes and ${fullSingleEvents(10_000)} at 10,000 and more (the events column).`,
      Number.isFinite(FULL_UP_TO)
        ? `The full recompute ran up to ${FULL_UP_TO.toLocaleString("en")} dataplanes only.`
        : "",
      "",
      table,
      "",
      "By kind of event (only a new service changes a service set; the others skip the mesh's pass, decision 073):",
      "",
      byKind,
      "",
      `![units per event](${NAME}.svg)`,
      "",
    ].join("\n"),
  );
  writeFileSync(`bench/results/${NAME}.json`, `${JSON.stringify(results, null, 2)}\n`);
  const mean = (r: Row, setChanging: boolean) => {
    const kinds = r.kinds.filter((k) => k.setChanging === setChanging);
    const events = kinds.reduce((sum, k) => sum + k.events, 0);
    const units = kinds.reduce(
      (sum, k) => sum + (k.readUnitsPerEvent + k.writeUnitsPerEvent) * k.events,
      0,
    );
    return events === 0 ? 0 : units / events;
  };
  const series = [
    ...DELIVERIES.flatMap((delivery) =>
      [false, true].map((setChanging) => ({
        name: `incremental, ${delivery === "single" ? "1 per invocation" : "batches of 100"}, ${setChanging ? "new service" : "no set change"}`,
        points: results
          .filter((r) => r.mode === "index" && r.delivery === delivery)
          .map((r) => ({ x: r.dataplanes, y: mean(r, setChanging) })),
      })),
    ),
    ...DELIVERIES.map((delivery) => ({
      name: `full recompute, ${delivery === "single" ? "1 per invocation" : "batches of 100"}`,
      points: results
        .filter((r) => r.mode === "tables" && r.delivery === delivery)
        .map((r) => ({ x: r.dataplanes, y: r.readUnitsPerEvent + r.writeUnitsPerEvent })),
    })),
  ];
  writeFileSync(
    `bench/results/${NAME}.svg`,
    renderChart({
      title: "Read + write capacity units per dataplane event",
      xLabel: "dataplanes in the table",
      yLabel: "capacity units per event",
      series,
    }),
  );
}
