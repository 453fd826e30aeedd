/**
 * DNS serving from a reader: a responder (dns-responder.ts) answering A, AAAA and PTR from the
 * reader's snapshot, its names rebuilt on every refresh, and the TTL rule enforced: an answer
 * may be cached for the TTL after the responder last refreshed, and its snapshot may be one
 * interval old. While TTL + interval is within the quarantine, a cached answer never names an
 * address another service has taken since.
 */
import type { SnapshotDiff } from "./diff.ts";
import { NameTable } from "./dns-names.ts";
import { DnsResponder } from "./dns-responder.ts";
import type { VipReaderError } from "./errors.ts";
import type { VipReader } from "./vip-reader.ts";

/** A TTL that, with the refresh interval, exceeds the quarantine. */
export class DnsTtlError extends RangeError {
  constructor(
    readonly ttl: number,
    readonly intervalSeconds: number,
    readonly quarantineSeconds: number,
  ) {
    super(
      `TTL ${ttl} s with a refresh every ${intervalSeconds} s exceeds the quarantine (${quarantineSeconds} s): a cached answer could name a VIP already given to another service`,
    );
    this.name = "DnsTtlError";
  }
}

/** The TTL rule: throws a {@link DnsTtlError} when `ttl + intervalSeconds > quarantineSeconds`. */
export function checkDnsTtl(ttl: number, intervalSeconds: number, quarantineSeconds: number): void {
  if (ttl + intervalSeconds > quarantineSeconds) {
    throw new DnsTtlError(ttl, intervalSeconds, quarantineSeconds);
  }
}

export interface ServeDnsOptions {
  /** Seconds an answer may be cached. */
  readonly ttl: number;
  /** Time between the end of one refresh and the start of the next. */
  readonly intervalMs: number;
  /** The allocator's quarantine (VIP_QUARANTINE_SECONDS): TTL + interval must stay within it. */
  readonly quarantineSeconds: number;
  /** Serve although TTL + interval exceed the quarantine. @default false */
  readonly ignoreTtlRule?: boolean;
  /** @default "127.0.0.1" */
  readonly host?: string;
  /** 0 picks a free port (the same one for UDP and TCP). @default 0 */
  readonly port?: number;
  /** The zone the names are served under (normalized, see dns-names.ts). */
  readonly domain: string;
  /** The VIP ranges PTR queries are answered for. */
  readonly ranges: readonly string[];
  /** Socket errors and the like, one line each. */
  readonly log?: (line: string) => void;
  /** Each time the names are built (at start and after each refresh that changed something). */
  readonly onNames?: (names: NameTable) => void;
  /** After a refresh that changed something, with the new names. */
  readonly onRefresh?: (diff: SnapshotDiff, names: NameTable) => void;
  /** A failed refresh (the responder keeps answering from the last snapshot). */
  readonly onError?: (error: VipReaderError) => void;
}

export interface DnsServer {
  /** The port listened on (UDP and TCP). */
  readonly port: number;
  /** The names answered now. */
  names(): NameTable;
  /** Stops refreshing, then closes the sockets. */
  stop(): Promise<void>;
}

/**
 * Checks the TTL rule, reads the table once, starts the responder and keeps its names fresh
 * with the reader's watch. A reader error of the first read, or a socket error, is thrown.
 */
export async function serveDns(reader: VipReader, options: ServeDnsOptions): Promise<DnsServer> {
  if (options.ignoreTtlRule !== true) {
    checkDnsTtl(options.ttl, options.intervalMs / 1000, options.quarantineSeconds);
  }
  await reader.refresh();
  const build = () =>
    new NameTable(reader.snapshot, { domain: options.domain, ranges: [...options.ranges] });
  let table = build();
  options.onNames?.(table);
  const responder = new DnsResponder({
    host: options.host ?? "127.0.0.1",
    port: options.port ?? 0,
    ttl: options.ttl,
    table,
    ...(options.log !== undefined ? { log: options.log } : {}),
  });
  const { port } = await responder.start();
  const watch = reader.watch(
    (diff) => {
      table = build();
      responder.update(table);
      options.onNames?.(table);
      options.onRefresh?.(diff, table);
    },
    {
      intervalMs: options.intervalMs,
      // The snapshot was just read: the first refresh runs one interval from now.
      immediate: false,
      ...(options.onError !== undefined ? { onError: options.onError } : {}),
    },
  );
  return {
    port,
    names: () => table,
    stop: async () => {
      await watch.stop();
      await responder.stop();
    },
  };
}
