import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import { summarizeDiff } from "../../../functions/reader/diff.ts";
import { NameTable, normalizeDomain, reverseName } from "../../../functions/reader/dns-names.ts";
import { VipReaderError } from "../../../functions/reader/errors.ts";
import {
  checkDnsTtl,
  type DnsServer,
  DnsTtlError,
  serveDns,
} from "../../../functions/reader/serve-dns.ts";
import { canonicalVip, type MalformedItem } from "../../../functions/reader/snapshot.ts";
import { VipReader } from "../../../functions/reader/vip-reader.ts";
import type { CliContext, Output } from "../context.ts";
import { CommandFailedError, type ExitCode, UsageError } from "../errors.ts";
import { untilSignal } from "./watch.ts";

export const DNS_DEFAULTS = {
  host: "127.0.0.1",
  port: 5353,
  domain: "mesh",
  ttl: 30,
  intervalSeconds: 5,
} as const;

/** The options `dns` and `resolve` take, as parsed by main. */
export interface DnsFlags {
  readonly host?: string;
  readonly port?: string;
  readonly domain?: string;
  readonly ttl?: string;
  readonly interval?: string;
  readonly force?: boolean;
}

function wholeNumber(flag: string, text: string | undefined, fallback: number, max: number) {
  if (text === undefined) return fallback;
  if (!/^\d+$/.test(text) || Number(text) > max) {
    throw new UsageError(
      `--${flag} ${JSON.stringify(text)}: expected a whole number from 0 to ${max}`,
    );
  }
  return Number(text);
}

export function domainOf(flags: DnsFlags): string {
  try {
    return normalizeDomain(flags.domain ?? DNS_DEFAULTS.domain);
  } catch (error) {
    throw new UsageError(`--domain: ${(error as Error).message}`);
  }
}

/** DNS TTLs are 31-bit (RFC 2181). */
const MAX_TTL = 2 ** 31 - 1;

/**
 * The TTL rule (functions/reader/serve-dns.ts) as a usage error naming the flags: TTL + interval
 * must stay within the quarantine.
 */
export function checkTtl(ttl: number, intervalSeconds: number, quarantineSeconds: number): void {
  try {
    checkDnsTtl(ttl, intervalSeconds, quarantineSeconds);
  } catch (error) {
    throw error instanceof DnsTtlError ? ttlUsageError(error) : error;
  }
}

function ttlUsageError(error: DnsTtlError): UsageError {
  return new UsageError(
    `--ttl ${error.ttl} with a refresh every ${error.intervalSeconds} s exceeds the quarantine (VIP_QUARANTINE_SECONDS=${error.quarantineSeconds}): a cached answer could name a VIP already given to another service; lower --ttl or --interval, or pass --force`,
  );
}

function reporter(out: Output): (item: MalformedItem) => void {
  return (item) =>
    out.note(
      `! skipped ${item.service === undefined ? "VIP item" : `service ${item.service} of VIP item`} of mesh ${item.mesh ?? "(no name)"}${item.version === undefined ? "" : ` version ${item.version}`}: ${item.reason}`,
    );
}

/** A reader error as one CLI line (exit 1). */
function failed(error: unknown): never {
  if (error instanceof VipReaderError)
    throw new CommandFailedError(`${error.code}: ${error.message}`);
  throw error;
}

/** Logs each collision once per responder life. */
function collisionLogger(out: Output): (table: NameTable) => void {
  const seen = new Set<string>();
  return (table) => {
    for (const collision of table.collisions) {
      const key = JSON.stringify(collision);
      if (seen.has(key)) continue;
      seen.add(key);
      out.note(
        `dns: ${collision.name} is wanted by ${[collision.winner, ...collision.losers].join(", ")}; answering ${collision.winner}`,
      );
    }
  };
}

/** A DNS responder fed by a reader (serveDns), logging to the CLI; shared by `dns` and the demo. */
export async function startDnsResponder(options: {
  readonly ctx: CliContext;
  readonly config: AllocatorConfig;
  readonly host: string;
  readonly port: number;
  readonly domain: string;
  readonly ttl: number;
  readonly intervalMs: number;
  /** `--force`, and the demo (which has always served without the rule). */
  readonly ignoreTtlRule: boolean;
}): Promise<DnsServer> {
  const { ctx, config } = options;
  const reader = new VipReader({
    client: ctx.ddb,
    table: ctx.tables.vips,
    onMalformed: reporter(ctx.out),
  });
  try {
    return await serveDns(reader, {
      ttl: options.ttl,
      intervalMs: options.intervalMs,
      quarantineSeconds: config.quarantineSeconds,
      ignoreTtlRule: options.ignoreTtlRule,
      host: options.host,
      port: options.port,
      domain: options.domain,
      ranges: [config.pool.cidr],
      log: (line) => ctx.out.note(line),
      onNames: collisionLogger(ctx.out),
      onRefresh: (diff, table) =>
        ctx.out.note(
          `dns: refresh: ${summarizeDiff(diff)}; ${table.size} names in ${reader.meshes().length} meshes`,
        ),
      onError: (error) =>
        ctx.out.note(`dns: refresh failed, answering from the last snapshot: ${error.message}`),
    });
  } catch (error) {
    if (error instanceof DnsTtlError) throw ttlUsageError(error);
    return failed(error);
  }
}

/** `dns`: serve A/AAAA/PTR for the VIPs over UDP and TCP until Ctrl-C. */
export async function dnsCommand(
  ctx: CliContext,
  config: AllocatorConfig,
  flags: DnsFlags,
): Promise<ExitCode> {
  const ttl = wholeNumber("ttl", flags.ttl, DNS_DEFAULTS.ttl, MAX_TTL);
  const port = wholeNumber("port", flags.port, DNS_DEFAULTS.port, 65535);
  const interval = wholeNumber("interval", flags.interval, DNS_DEFAULTS.intervalSeconds, 86400);
  if (interval === 0) throw new UsageError("--interval must be at least 1 second");
  const domain = domainOf(flags);
  const host = flags.host ?? DNS_DEFAULTS.host;
  let server: DnsServer;
  try {
    server = await startDnsResponder({
      ctx,
      config,
      host,
      port,
      domain,
      ttl,
      intervalMs: interval * 1000,
      ignoreTtlRule: flags.force === true,
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE" || code === "EACCES" || code === "EADDRNOTAVAIL") {
      throw new CommandFailedError(`cannot listen on ${host}:${port}: ${code}`);
    }
    throw error;
  }
  ctx.out.line(`listening on ${host}:${server.port} (udp, tcp)`);
  ctx.out.note(
    `dns: serving ${server.names().size} names under ${domain} (ttl ${ttl} s, refresh every ${interval} s) from table ${ctx.tables.vips} at ${ctx.where()}; try: dig @${host} -p ${server.port} SERVICE.${domain} (Ctrl-C stops)`,
  );
  await untilSignal();
  ctx.out.note("stopping ...");
  await server.stop();
  return 0;
}

/** `resolve NAME`: what the responder would answer, from one read of the table. */
export async function resolveCommand(
  ctx: CliContext,
  config: AllocatorConfig,
  name: string,
  flags: DnsFlags,
): Promise<ExitCode> {
  const ttl = wholeNumber("ttl", flags.ttl, DNS_DEFAULTS.ttl, MAX_TTL);
  const domain = domainOf(flags);
  const reader = new VipReader({
    client: ctx.ddb,
    table: ctx.tables.vips,
    onMalformed: reporter(ctx.out),
  });
  await reader.refresh().catch(failed);
  const table = new NameTable(reader.snapshot, { domain, ranges: [config.pool.cidr] });
  const bare = name.replace(/\.$/, "");
  const address = canonicalVip(bare);
  const questions: Array<[string, string]> =
    address !== undefined
      ? [[reverseName(address), "PTR"]]
      : bare.toLowerCase().endsWith(".arpa")
        ? [[bare, "PTR"]]
        : [
            [bare, "A"],
            [bare, "AAAA"],
          ];
  const results = questions.map(([qname, type]) => ({ type, ...table.resolve(qname, type) }));
  const status = results[0]?.status ?? "NXDOMAIN";
  const answers = results.flatMap((result) => result.answers.map((a) => ({ ...a, ttl })));
  const qname = (questions[0] as [string, string])[0].toLowerCase();
  if (ctx.json) {
    ctx.out.line(JSON.stringify({ name: qname, status, answers }));
  } else if (answers.length > 0) {
    for (const a of answers)
      ctx.out.line(`${a.name}.\t${a.ttl}\tIN\t${a.type}\t${a.data}${a.type === "PTR" ? "." : ""}`);
  } else {
    ctx.out.line(`${qname}.: ${status}${status === "NOERROR" ? " (no records of that type)" : ""}`);
  }
  return status === "NOERROR" ? 0 : 1;
}
