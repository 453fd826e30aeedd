import { loadConfig } from "../../../functions/allocator/config.ts";
import type { VipItem } from "../../../functions/domain/types.ts";
import { createTables } from "../../../functions/store/create-tables.ts";
import {
  chooseEngine,
  EmulatorUnavailableError,
  ENGINE_NAMES,
  type LocalEmulator,
  startEmulator,
} from "../../local/emulator.ts";
import type { LocalFunction } from "../../local/local-function.ts";
import type { BatchInfo, DrainReport, StreamPoller } from "../../local/poller.ts";
import {
  allocatorFunction,
  allocatorPoller,
  CliContext,
  IN_CLONE,
  type Output,
  prepareEnvironment,
} from "../context.ts";
import { demoData } from "../demo-data.ts";
import { CliError, type ExitCode } from "../errors.ts";
import { DNS_DEFAULTS, startDnsResponder } from "./dns.ts";
import { describeDrain, failIfGaveUp } from "./drain.ts";
import { scanVipItems } from "./vips.ts";
import { untilSignal, VipWatcher } from "./watch.ts";

/** The file the closing hint tells the user to apply from another terminal (in a clone). */
export const DEMO_HINT_FILE = "test/fixtures/kuma/web.yaml";

/** How to add a dataplane from another terminal: a clone's fixture, or the installed CLI's. */
export function addDataplaneHint(endpoint: string): string {
  return IN_CLONE
    ? `DYNAMODB_ENDPOINT=${endpoint} npm run --silent vips -- apply -f ${DEMO_HINT_FILE}`
    : `vips apply -f web.yaml --endpoint ${endpoint} (a Kuma Dataplane of mesh default: vips apply --help)`;
}

/** The `dig` line the demo prints: a service of the demo that has a VIP. */
export function digHint(items: ReadonlyMap<string, VipItem>, port: number, domain: string): string {
  const services = [...items.values()].flatMap((item) => Object.keys(item.vips)).sort();
  const service = services.includes("auth") ? "auth" : (services[0] ?? "web");
  return `dig @127.0.0.1 -p ${port} ${service}.${domain}`;
}

/** The per-mesh summary: services sorted, their VIPs, the version; then shared services. */
export function summaryLines(items: ReadonlyMap<string, VipItem>): string[] {
  const lines: string[] = [];
  const meshes = [...items.keys()].sort();
  for (const mesh of meshes) {
    const item = items.get(mesh) as VipItem;
    const services = Object.keys(item.vips).sort();
    const unallocated = Object.keys(item.unallocated ?? {}).sort();
    lines.push(
      `mesh ${mesh}: version ${item.version}, ${services.length} service${services.length === 1 ? "" : "s"} (${item.cidr})`,
    );
    const width = Math.max(0, ...services.map((s) => s.length));
    for (const service of services) lines.push(`  ${service.padEnd(width)}  ${item.vips[service]}`);
    for (const service of unallocated) {
      lines.push(`  ${service.padEnd(width)}  (no VIP: ${item.unallocated?.[service]})`);
    }
    // Hosts of external services, under their own names.
    for (const host of Object.keys(item.hosts ?? {}).sort()) {
      lines.push(`  host ${host}  ${item.hosts?.[host]}`);
    }
  }
  const holders = new Map<string, string[]>();
  for (const mesh of meshes) {
    for (const service of Object.keys(items.get(mesh)?.vips ?? {})) {
      holders.set(service, [...(holders.get(service) ?? []), mesh]);
    }
  }
  for (const [service, inMeshes] of [...holders.entries()].sort()) {
    if (inMeshes.length < 2) continue;
    const vip = items.get(inMeshes[0] as string)?.vips[service];
    lines.push(`shared: ${service} has ${vip} in meshes ${inMeshes.join(", ")}`);
  }
  return lines;
}

function progressReporter(out: Output, total: number): (info: BatchInfo) => void {
  let done = 0;
  const interactive = process.stderr.isTTY === true;
  return (info) => {
    if (info.outcome === "ok" || info.outcome === "gave-up") done += info.records.length;
    else if (info.outcome === "partial") {
      const index = info.records.findIndex((r) => r.dynamodb?.SequenceNumber === info.resumeFrom);
      done += Math.max(0, index);
    }
    const text = `draining streams: ${done}/${total} records (${info.table}: batch of ${info.records.length}, ${info.outcome})`;
    if (interactive) process.stderr.write(`\r\x1b[2K${text}`);
    else out.note(text);
  };
}

/**
 * `demo` (what `npm start` runs): a local DynamoDB engine (unless --endpoint; which one:
 * VIPS_EMULATOR, see tools/local/emulator.ts), tables, a seeded demo, the
 * backlog drained with progress, a per-mesh summary, then live changes until Ctrl-C (or exit
 * right after the summary with --once).
 */
export async function demoCommand(options: {
  endpoint: string | undefined;
  env: Record<string, string | undefined>;
  json: boolean;
  once: boolean;
  out: Output;
  /** The function's timeout, emulated (`--function-timeout`); unset: none. */
  functionTimeout?: number | undefined;
}): Promise<ExitCode> {
  const { out } = options;
  let emulator: LocalEmulator | undefined;
  if (options.endpoint === undefined) {
    try {
      const engine = await chooseEngine({ note: (line) => out.note(line) });
      out.note(`starting ${ENGINE_NAMES[engine]} (local DynamoDB + Streams) ...`);
      emulator = await startEmulator({ engine });
    } catch (error) {
      if (error instanceof EmulatorUnavailableError) throw new CliError(error.message, 2);
      throw error;
    }
  }
  const endpoint = options.endpoint ?? (emulator as LocalEmulator).endpoint;
  prepareEnvironment(options.env, endpoint);
  const config = loadConfig(options.env);
  const ctx = new CliContext(endpoint, options.env, options.json, out);
  let poller: StreamPoller | undefined;
  let fn: LocalFunction | undefined;
  let dns: Awaited<ReturnType<typeof startDnsResponder>> | undefined;
  let watcher: VipWatcher | undefined;
  let stopFollowing = () => {};
  try {
    out.note(
      `DynamoDB endpoint: ${endpoint}${emulator !== undefined ? ` (${ENGINE_NAMES[emulator.engine]}, stopped on exit)` : ""}`,
    );
    const tables = await createTables(ctx.ddb, ctx.tables, { vipsStream: true });
    out.note(`tables ready: ${tables.map((t) => t.name).join(", ")}`);

    const data = demoData();
    await ctx.doc.batchWrite(
      ctx.tables.meshes,
      data.meshes.map((name) => ({ put: { name } })),
    );
    await ctx.doc.batchWrite(
      ctx.tables.dataplanes,
      data.dataplanes.map((item) => ({ put: { ...item } })),
    );
    const external = ctx.tables.externalServices;
    const seededExternal = external === undefined ? [] : data.externalServices;
    if (external !== undefined) {
      await ctx.doc.batchWrite(
        external,
        seededExternal.map((item) => ({ put: { ...item } })),
      );
    }
    out.note(
      `seeded ${data.meshes.length} meshes (${data.meshes.join(", ")}) and ${data.dataplanes.length} dataplanes${seededExternal.length > 0 ? ` and ${seededExternal.length} external service${seededExternal.length === 1 ? "" : "s"}` : ""}:`,
    );
    for (const highlight of data.highlights) out.note(`  - ${highlight}`);

    let onBatch: (info: BatchInfo) => void | Promise<void> = progressReporter(
      out,
      data.meshes.length + data.dataplanes.length + seededExternal.length,
    );
    fn = allocatorFunction(ctx, config, options.functionTimeout);
    poller = allocatorPoller(
      ctx,
      config,
      {
        endpoint,
        // An emulator started here is new each time; a given endpoint keeps its checkpoints.
        checkpointFile: emulator === undefined ? ctx.checkpointFile : undefined,
        onBatch: (info) => onBatch(info),
      },
      fn,
    );
    const report: DrainReport = await poller.drain();
    await fn.idle();
    if (process.stderr.isTTY === true) process.stderr.write("\n");
    out.note(describeDrain(report, fn.stats));

    const items = await scanVipItems(ctx);
    if (options.json) {
      out.line(JSON.stringify({ report, meshes: Object.fromEntries(items) }));
    } else {
      for (const line of summaryLines(items)) out.line(line);
    }
    failIfGaveUp(report);
    if (options.once) return 0;

    watcher = new VipWatcher(ctx, config.quarantineSeconds);
    await watcher.prime(items);
    const watching = watcher;
    onBatch = (info) => watching.onBatch(info);
    poller.start();
    stopFollowing = watcher.follow();
    // The DNS responder, on a free port, refreshed every second from the vips table.
    dns = await startDnsResponder({
      ctx,
      config,
      host: "127.0.0.1",
      port: 0,
      domain: DNS_DEFAULTS.domain,
      ttl: DNS_DEFAULTS.ttl,
      intervalMs: 1000,
      ignoreTtlRule: true,
    });
    out.note(
      `DNS responder (UDP and TCP, answers from memory): ${digHint(items, dns.port, DNS_DEFAULTS.domain)}`,
    );
    const where = emulator !== undefined ? endpoint : ctx.where();
    out.note(
      `watching for changes (Ctrl-C to stop); add a dataplane from another terminal: ${addDataplaneHint(where)}`,
    );
    await untilSignal();
    out.note("stopping ...");
    await poller.stop();
    await fn.idle();
    return 0;
  } finally {
    stopFollowing();
    watcher?.close();
    await dns?.stop();
    poller?.destroy();
    ctx.close();
    await emulator?.stop();
  }
}
