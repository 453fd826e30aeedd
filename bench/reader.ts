/**
 * What a downstream reader costs, and how fast the DNS responder answers.
 *
 * 1. Read units per refresh of a VipReader on the local engine (VIPS_EMULATOR), computed from item sizes as DynamoDB
 *    bills them (bench/cost-meter.ts), with an unchanged 20,000-service mesh (format 2): the
 *    version probe (nothing moved, so nothing is fetched) against a full re-read of the table;
 *    the same for 100 ordinary meshes of 20 services, probed with the one keys-only Scan
 *    against one projected GetItem per mesh. Also the bytes returned to the client and the
 *    time to decode the big item.
 * 2. The DNS responder (`vips dns`, a separate process, reading the same table): 10,000 UDP
 *    queries for random services of the 20,000 (seeded; 1 in 10 for a name that does not
 *    exist), one at a time and 32 in flight; queries per second and latency percentiles.
 *
 *   npm run bench:reader
 * Results: bench/results/reader.{md,json}.
 */

import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import {
  type AttributeValue,
  DynamoDBClient,
  GetItemCommand,
  paginateScan,
} from "@aws-sdk/client-dynamodb";
import { recordOf } from "../functions/domain/records.ts";
import type { VipItem } from "../functions/domain/types.ts";
import { meshViewOf } from "../functions/reader/snapshot.ts";
import { VipReader } from "../functions/reader/vip-reader.ts";
import { createTables } from "../functions/store/create-tables.ts";
import { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { resolveTableNames } from "../functions/store/table-definitions.ts";
import { encodeVipItem } from "../functions/store/vip-item-codec.ts";
import { seededRandom as random } from "../test/fixtures/in-memory-ports.ts";
import { ENGINE_LABELS, startEmulator } from "../tools/local/emulator.ts";
import { itemSize } from "./capacity-units.ts";
import { CostMeter } from "./cost-meter.ts";
import { type LoadResult, load } from "./dns-load.ts";

const BIG_SERVICES = 20_000;
const SMALL_MESHES = 100;
const SMALL_SERVICES = 20;
const REFRESHES = 10;
const QUERIES = 10_000;
const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };

function serviceName(i: number): string {
  return `svc-${i}_ns-${i % 40}_svc_${8000 + (i % 100)}`;
}

function meshItem(mesh: string, services: number, offset: number): VipItem {
  const vips: [string, string][] = [];
  for (let i = 0; i < services; i++) {
    const n = offset + i;
    vips.push([serviceName(n), `240.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`]);
  }
  return {
    mesh,
    version: 1,
    vips: recordOf(vips),
    cidr: "240.0.0.0/4",
    updatedAt: "2026-12-03T00:00:00.000Z",
    incarnation: `inc-${mesh}`,
  };
}

/** Sums the sizes of the items (attributes) DynamoDB returned to this client. */
function countReturnedBytes(client: DynamoDBClient): { bytes: number } {
  const counter = { bytes: 0 };
  client.middlewareStack.add(
    (next) => async (args) => {
      const result = await next(args);
      const output = result.output as {
        Items?: Record<string, AttributeValue>[];
        Item?: Record<string, AttributeValue>;
      };
      for (const item of output.Items ?? []) counter.bytes += itemSize(item);
      if (output.Item !== undefined) counter.bytes += itemSize(output.Item);
      return result;
    },
    { step: "initialize", name: "returnedBytes" },
  );
  return counter;
}

interface CostRow {
  readonly scenario: string;
  readonly method: string;
  readonly requestsPerRefresh: number;
  readonly readUnitsPerRefresh: number;
  readonly bytesReturnedPerRefresh: number;
}

async function measure(
  endpoint: string,
  scenario: string,
  method: string,
  refresh: (client: DynamoDBClient) => Promise<unknown>,
  prime?: (client: DynamoDBClient) => Promise<unknown>,
): Promise<CostRow> {
  const side = new DynamoDBClient({ endpoint, region: "us-east-1", credentials: CREDENTIALS });
  const client = new DynamoDBClient({ endpoint, region: "us-east-1", credentials: CREDENTIALS });
  const meter = new CostMeter(side);
  meter.install(client);
  const returned = countReturnedBytes(client);
  if (prime !== undefined) await prime(client);
  meter.reset();
  returned.bytes = 0;
  for (let i = 0; i < REFRESHES; i++) await refresh(client);
  const totals = meter.snapshot();
  client.destroy();
  side.destroy();
  return {
    scenario,
    method,
    requestsPerRefresh: totals.requests / REFRESHES,
    readUnitsPerRefresh: totals.readUnits / REFRESHES,
    bytesReturnedPerRefresh: Math.round(returned.bytes / REFRESHES),
  };
}

async function fullScan(client: DynamoDBClient, table: string): Promise<void> {
  for await (const _page of paginateScan({ client }, { TableName: table })) {
    // the pages are what is billed
  }
}

/** The names the load queries (seeded; 1 in 10 does not exist). */
function queryNames(concurrency: number): string[] {
  const next = random(42 + concurrency);
  return Array.from({ length: QUERIES }, () =>
    next() < 0.1
      ? `missing-${Math.floor(next() * 1e6)}.mesh`
      : `${serviceName(Math.floor(next() * BIG_SERVICES))}.mesh`,
  );
}

async function main(): Promise<void> {
  const emulator = await startEmulator();
  const ENGINE_LABEL = ENGINE_LABELS[emulator.engine];
  console.error(`engine: ${ENGINE_LABEL}`);
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: CREDENTIALS,
  });
  const doc = new DynamoItemClient(client);
  const bigTables = resolveTableNames({
    VIPS_TABLE: "bench-big-vips",
    MESHES_TABLE: "bench-meshes",
    DATAPLANES_TABLE: "bench-dataplanes",
    CLAIMS_TABLE: "bench-claims",
    VIP_INDEX_TABLE: "bench-index",
  });
  const smallTable = "bench-small-vips";
  await createTables(client, bigTables);
  await createTables(client, { ...bigTables, vips: smallTable });
  let dns: ReturnType<typeof spawn> | undefined;
  try {
    const big = encodeVipItem(meshItem("big", BIG_SERVICES, 0));
    await doc.put({ TableName: bigTables.vips, Item: big.stored });
    for (let m = 0; m < SMALL_MESHES; m++) {
      const { stored } = encodeVipItem(
        meshItem(`mesh-${m}`, SMALL_SERVICES, BIG_SERVICES + m * SMALL_SERVICES),
      );
      await doc.put({ TableName: smallTable, Item: stored });
    }
    const smallBytes = itemSize(
      (
        await client.send(
          new GetItemCommand({ TableName: smallTable, Key: { mesh: { S: "mesh-0" } } }),
        )
      ).Item,
    );
    process.stderr.write(
      `big item: ${big.bytes} bytes (format ${String(big.stored.format ?? 1)}); small items: ${smallBytes} bytes\n`,
    );

    const rows: CostRow[] = [];
    const endpoint = emulator.endpoint;
    // 1. The 20,000-service mesh, unchanged.
    {
      let reader: VipReader | undefined;
      rows.push(
        await measure(
          endpoint,
          "one mesh of 20,000 services",
          "probe: Scan of the versions index (the default)",
          () => (reader as VipReader).refresh(),
          async (c) => {
            reader = new VipReader({ client: c, table: bigTables.vips });
            await reader.refresh();
          },
        ),
      );
      let onTable: VipReader | undefined;
      rows.push(
        await measure(
          endpoint,
          "one mesh of 20,000 services",
          "probe: projected Scan of the table (probe: table)",
          () => (onTable as VipReader).refresh(),
          async (c) => {
            onTable = new VipReader({ client: c, table: bigTables.vips, probe: "table" });
            await onTable.refresh();
          },
        ),
      );
      let listed: VipReader | undefined;
      rows.push(
        await measure(
          endpoint,
          "one mesh of 20,000 services",
          "probe: projected GetItem (meshes: [big], probe: table)",
          () => (listed as VipReader).refresh(),
          async (c) => {
            listed = new VipReader({
              client: c,
              table: bigTables.vips,
              meshes: ["big"],
              probe: "table",
            });
            await listed.refresh();
          },
        ),
      );
      rows.push(
        await measure(endpoint, "one mesh of 20,000 services", "full re-read: Scan", (c) =>
          fullScan(c, bigTables.vips),
        ),
      );
      rows.push(
        await measure(endpoint, "one mesh of 20,000 services", "full re-read: GetItem", (c) =>
          c.send(new GetItemCommand({ TableName: bigTables.vips, Key: { mesh: { S: "big" } } })),
        ),
      );
    }
    // 2. 100 small meshes, unchanged.
    {
      let reader: VipReader | undefined;
      rows.push(
        await measure(
          endpoint,
          `${SMALL_MESHES} meshes of ${SMALL_SERVICES} services`,
          "probe: Scan of the versions index (the default)",
          () => (reader as VipReader).refresh(),
          async (c) => {
            reader = new VipReader({ client: c, table: smallTable });
            await reader.refresh();
          },
        ),
      );
      let onTable: VipReader | undefined;
      rows.push(
        await measure(
          endpoint,
          `${SMALL_MESHES} meshes of ${SMALL_SERVICES} services`,
          "probe: projected Scan of the table (probe: table)",
          () => (onTable as VipReader).refresh(),
          async (c) => {
            onTable = new VipReader({ client: c, table: smallTable, probe: "table" });
            await onTable.refresh();
          },
        ),
      );
      let listed: VipReader | undefined;
      rows.push(
        await measure(
          endpoint,
          `${SMALL_MESHES} meshes of ${SMALL_SERVICES} services`,
          `probe: Query of the versions index per mesh (${SMALL_MESHES} listed)`,
          () => (listed as VipReader).refresh(),
          async (c) => {
            listed = new VipReader({
              client: c,
              table: smallTable,
              meshes: Array.from({ length: SMALL_MESHES }, (_, m) => `mesh-${m}`),
            });
            await listed.refresh();
          },
        ),
      );
      rows.push(
        await measure(
          endpoint,
          `${SMALL_MESHES} meshes of ${SMALL_SERVICES} services`,
          "full re-read: Scan",
          (c) => fullScan(c, smallTable),
        ),
      );
    }

    // Decode time of the big item: what a probe saves the client when nothing moved.
    const decodeMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const start = performance.now();
      meshViewOf(big.stored);
      decodeMs.push(performance.now() - start);
    }
    decodeMs.sort((a, b) => a - b);

    // 2. The DNS responder, as `vips dns` runs it.
    dns = spawn(
      process.execPath,
      ["--import", "tsx", "tools/cli/bin.ts", "dns", "--port", "0", "--interval", "5"],
      {
        env: {
          ...process.env,
          DYNAMODB_ENDPOINT: emulator.endpoint,
          VIPS_TABLE: bigTables.vips,
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
        },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let output = "";
    dns.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    dns.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const deadline = Date.now() + 60_000;
    let port: number | undefined;
    while (port === undefined && Date.now() < deadline) {
      const match = /listening on 127\.0\.0\.1:(\d+)/.exec(output);
      if (match) port = Number(match[1]);
      else await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (port === undefined) throw new Error(`vips dns did not start:\n${output}`);
    await load(port, 8, queryNames(8)); // warm-up, not reported
    const loads = [await load(port, 1, queryNames(1)), await load(port, 32, queryNames(32))];
    report(rows, decodeMs[2] ?? 0, big.bytes, smallBytes, loads, ENGINE_LABEL);
  } finally {
    dns?.kill("SIGINT");
    client.destroy();
    await emulator.stop();
  }
}

function report(
  rows: CostRow[],
  decodeMs: number,
  bigBytes: number,
  smallBytes: number,
  loads: LoadResult[],
  engineLabel: string,
): void {
  const when = new Date().toISOString();
  const machine = `${cpus().length} CPUs (${cpus()[0]?.model.split(" ").slice(0, 2).join(" ")}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  const json = {
    run: when,
    machine,
    engine: engineLabel,
    refreshesPerRow: REFRESHES,
    bigItemBytes: bigBytes,
    smallItemBytes: smallBytes,
    bigItemDecodeMs: Number(decodeMs.toFixed(1)),
    reads: rows,
    dns: loads,
  };
  mkdirSync("bench/results", { recursive: true });
  writeFileSync("bench/results/reader.json", `${JSON.stringify(json, null, 2)}\n`);
  const md = [
    "# What a reader costs, and how fast the DNS responder answers",
    "",
    `Run ${when} with \`npm run bench:reader\` on ${machine}, ${engineLabel}.`,
    "",
    `Read units are computed from item sizes as DynamoDB bills them (bench/cost-meter.ts; eventually consistent: 0.5 unit per 4 KB, rounded up per item for GetItem and Query and per page for Scan; a projection does not reduce them, reading the versions index is billed by its entries' size). Averages over ${REFRESHES} refreshes with nothing changed. The 20,000-service item is stored in format 2 (${bigBytes} bytes); the small items are ${smallBytes} bytes. Bytes returned: the attributes DynamoDB sent back.`,
    "",
    "| table | method | requests/refresh | read units/refresh | bytes returned/refresh |",
    "|---|---|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.scenario} | ${r.method} | ${r.requestsPerRefresh} | ${r.readUnitsPerRefresh} | ${r.bytesReturnedPerRefresh} |`,
    ),
    "",
    `Decoding the 20,000-service item (gunzip, JSON, checks): ${decodeMs.toFixed(1)} ms (median of 5), skipped by a probe that finds nothing moved.`,
    "",
    `DNS: \`vips dns\` as a separate process serving the 20,000-service mesh; ${QUERIES} UDP A queries from this process (1 in 10 for a missing name), after a warm-up run.`,
    "",
    "| in flight | answered | NXDOMAIN | lost | queries/s | p50 ms | p99 ms | max ms |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...loads.map(
      (l) =>
        `| ${l.concurrency} | ${l.answered} | ${l.nxdomain} | ${l.lost} | ${l.qps} | ${l.p50Ms} | ${l.p99Ms} | ${l.maxMs} |`,
    ),
    "",
  ].join("\n");
  writeFileSync("bench/results/reader.md", md);
  process.stdout.write(`${md}\n`);
}

await main();
