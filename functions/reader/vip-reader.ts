/**
 * A downstream reader of the vips table: an in-memory snapshot of every mesh's VIP item, kept
 * fresh by a cheap version probe, answering `get`, `lookup`, `reverse` and `meshes` from memory.
 *
 * The probe (version-probe.ts; docs/readers.md, "Costs"):
 * - all meshes (default): one paged Scan of the table's `versions` index, which holds only
 *   `mesh`, `version` and `incarnation` of every item (billed by those few bytes, where a read
 *   of the table is billed by the whole item whatever the projection); it is also the discovery
 *   of new and removed meshes;
 * - a fixed list of meshes (`meshes` option): one Query of that index per mesh; no discovery.
 * Strongly consistent probes (`consistentRead: true`; an index cannot serve them), `probe:
 * "table"`, tables created without the index and callers denied it read the table itself,
 * projecting the same three attributes (a Scan, or a GetItem per listed mesh).
 * Then a GetItem of the full item only for meshes whose version (or incarnation) moved. Reads
 * are eventually consistent unless `consistentRead: true`.
 */
import {
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
} from "@aws-sdk/client-dynamodb";
import { fromAttributeMap, type PlainRecord } from "../store/attribute-values.ts";
import { resolveTableNames } from "../store/table-definitions.ts";
import { diffSnapshots, isEmptyDiff, type SnapshotDiff } from "./diff.ts";
import { readerErrorOf, VipReaderError } from "./errors.ts";
import {
  type HostLookup,
  type MalformedItem,
  type MeshView,
  meshViewOf,
  type ReverseLookup,
  type ServiceLookup,
  VipSnapshot,
} from "./snapshot.ts";
import {
  defaultProbeFallback,
  inPool,
  type Probe,
  type ProbeFallback,
  probeOf,
  VersionProbe,
} from "./version-probe.ts";

export type { ProbeFallback } from "./version-probe.ts";

export interface VipReaderOptions {
  /**
   * A DynamoDB client (region, credentials, endpoint are the caller's). Give it, or let the
   * reader build one from `region`, `endpoint` and `credentials` (not both).
   */
  readonly client?: DynamoDBClient;
  /**
   * The region to read in: the nearest replica of the vips table (the construct's
   * `readerRegions`), for a client the reader builds. @default the SDK's (`AWS_REGION`, ...)
   */
  readonly region?: string;
  /**
   * A DynamoDB endpoint URL (a local engine such as DynamoDB Local, a VPC endpoint), for a
   * client the reader builds. @default the region's public endpoint
   */
  readonly endpoint?: string;
  /**
   * Credentials for a client the reader builds (a local engine accepts any, e.g.
   * `{ accessKeyId: "local", secretAccessKey: "local" }`). @default the SDK's provider chain
   */
  readonly credentials?: DynamoDBClientConfig["credentials"];
  /** The vips table. @default `VIPS_TABLE` from the environment, else "vips" */
  readonly table?: string;
  /**
   * Strongly consistent probes and fetches (twice the read units, and not served by
   * global-table replicas in other regions). @default false: eventually consistent
   */
  readonly consistentRead?: boolean;
  /**
   * Follow only these meshes, probing each with a Query of the `versions` index (a GetItem
   * when the probe reads the table); meshes are then never discovered.
   * @default every mesh in the table, probed with one paged Scan of the `versions` index
   */
  readonly meshes?: readonly string[];
  /**
   * Called once per malformed item (or entry) and version; the item is skipped and the mesh
   * keeps its last good view, if any. @default one JSON line on stderr
   */
  readonly onMalformed?: (item: MalformedItem) => void;
  /**
   * Where the eventually consistent probe reads: the table's `versions` index (billed by the
   * few bytes of each entry) or the table itself (billed by each item's whole size). A table
   * without the index is probed on the table whatever this says. @default "index"
   */
  readonly probe?: "index" | "table";
  /** Full-item fetches in flight at once. @default 8 */
  readonly fetchConcurrency?: number;
  /**
   * Called once when the probe leaves the `versions` index for the table: the index does not
   * exist, or the caller may not read it (AccessDenied: a grant on the table ARN only). The
   * reader then probes the table for the rest of its life (each probe billed by the items'
   * whole size). @default one JSON line on stderr
   */
  readonly onProbeFallback?: (fallback: ProbeFallback) => void;
}

/** What the last refresh did, in requests. */
export interface RefreshStats {
  /** Probe requests (Scan pages, or a Query or GetItem per listed mesh). */
  readonly probeRequests: number;
  /** Full-item GetItems (meshes whose version moved). */
  readonly fetches: number;
  readonly meshes: number;
}

export interface WatchOptions {
  /** Time between the end of one refresh and the start of the next. @default 5000 */
  readonly intervalMs?: number;
  /** Refresh at once (true), or first after one interval. @default true */
  readonly immediate?: boolean;
  /** A failed refresh (the snapshot is kept; the next one runs as planned). @default stderr */
  readonly onError?: (error: VipReaderError) => void;
}

export interface WatchHandle {
  /** Stops after the refresh in progress, if any. */
  stop(): Promise<void>;
}

function defaultMalformed(item: MalformedItem): void {
  process.stderr.write(
    `${JSON.stringify({ level: "WARN", message: "VIP item skipped", ...item })}\n`,
  );
}

/** The given client, or one built from `region`, `endpoint` and `credentials`. */
function clientOf(options: VipReaderOptions): DynamoDBClient {
  const { client, region, endpoint, credentials } = options;
  const building = { region, endpoint, credentials };
  const given = Object.entries(building).filter(([, value]) => value !== undefined);
  if (client !== undefined) {
    if (given.length === 0) return client;
    throw new VipReaderError(
      "INVALID_OPTIONS",
      `VipReader: give a client, or ${given.map(([name]) => name).join(" and ")} for the ` +
        "client the reader builds, not both",
    );
  }
  if (endpoint !== undefined && !/^https?:\/\/[^/]/.test(endpoint)) {
    throw new VipReaderError(
      "INVALID_OPTIONS",
      `VipReader: endpoint ${JSON.stringify(endpoint)} is not an http(s) URL`,
    );
  }
  if (region !== undefined && !/^[a-z0-9-]{1,64}$/.test(region)) {
    throw new VipReaderError(
      "INVALID_OPTIONS",
      `VipReader: region ${JSON.stringify(region)} is not a region name`,
    );
  }
  return new DynamoDBClient(Object.fromEntries(given) as DynamoDBClientConfig);
}

export class VipReader {
  readonly table: string;
  /** The client the reader sends with: the one given, or the one it built (`region`, ...). */
  readonly client: DynamoDBClient;
  private readonly consistent: boolean;
  private readonly fixedMeshes: readonly string[] | undefined;
  private readonly onMalformed: (item: MalformedItem) => void;
  private readonly probe: VersionProbe;
  private readonly concurrency: number;
  private current = new VipSnapshot();
  /** Per mesh, the version and incarnation last fetched (good or malformed). */
  private known = new Map<string, Probe>();
  /** Issues already reported, so an unchanged bad item is reported once. */
  private reported = new Set<string>();
  private queue: Promise<unknown> = Promise.resolve();
  private refreshed = false;
  private stats: RefreshStats = { probeRequests: 0, fetches: 0, meshes: 0 };

  constructor(options: VipReaderOptions) {
    this.client = clientOf(options);
    this.table = options.table ?? resolveTableNames(process.env).vips;
    this.consistent = options.consistentRead === true;
    this.fixedMeshes = options.meshes === undefined ? undefined : [...new Set(options.meshes)];
    this.onMalformed = options.onMalformed ?? defaultMalformed;
    this.concurrency = Math.max(1, options.fetchConcurrency ?? 8);
    this.probe = new VersionProbe({
      client: this.client,
      table: this.table,
      consistent: this.consistent,
      viaIndex: !this.consistent && options.probe !== "table",
      concurrency: this.concurrency,
      onProbeFallback: options.onProbeFallback ?? defaultProbeFallback,
      onMalformed: (item) => this.report(item),
    });
  }

  /** Whether a refresh has succeeded (before that, the snapshot is empty). */
  get ready(): boolean {
    return this.refreshed;
  }

  /** The current snapshot (immutable; a refresh replaces it). */
  get snapshot(): VipSnapshot {
    return this.current;
  }

  /** What the last successful refresh did. */
  get lastRefresh(): RefreshStats {
    return this.stats;
  }

  get(mesh: string): MeshView | undefined {
    return this.current.get(mesh);
  }

  /** A service's VIP and the meshes listing it. */
  lookup(service: string): ServiceLookup | undefined {
    return this.current.lookup(service);
  }

  /** Whose a VIP is. */
  reverse(vip: string): ReverseLookup | undefined {
    return this.current.reverse(vip);
  }

  /** An external service's host's VIP and the meshes listing it (`MeshView.hosts` per mesh). */
  lookupHost(host: string): HostLookup | undefined {
    return this.current.lookupHost(host);
  }

  /** Which host a VIP is, when it is a host's. */
  reverseHost(vip: string): HostLookup | undefined {
    return this.current.reverseHost(vip);
  }

  /** Mesh names, sorted. */
  meshes(): string[] {
    return this.current.meshes();
  }

  /**
   * Probes the table and fetches what moved; returns what changed. One refresh at a time
   * (concurrent calls queue). Throws a {@link VipReaderError}; the snapshot is then unchanged.
   */
  refresh(): Promise<SnapshotDiff> {
    const run = this.queue.then(() => this.refreshNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Refreshes every `intervalMs` and calls `onChange` after each refresh that changed
   * something. The first refresh runs at once unless `immediate: false`.
   */
  watch(
    onChange: (diff: SnapshotDiff, snapshot: VipSnapshot) => void | Promise<void>,
    options: WatchOptions = {},
  ): WatchHandle {
    const interval = options.intervalMs ?? 5000;
    const onError =
      options.onError ??
      ((error: VipReaderError) => process.stderr.write(`vip reader: ${error.message}\n`));
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    let running: Promise<void> = Promise.resolve();
    const tick = (): void => {
      running = (async () => {
        let diff: SnapshotDiff | undefined;
        try {
          diff = await this.refresh();
        } catch (error) {
          onError(
            error instanceof VipReaderError ? error : readerErrorOf(error, this.table, "refresh"),
          );
        }
        if (diff !== undefined && !isEmptyDiff(diff) && !stopped) {
          try {
            await onChange(diff, this.current);
          } catch (error) {
            const detail = error instanceof Error ? error.message : String(error);
            onError(
              new VipReaderError("LISTENER_ERROR", `watch callback failed: ${detail}`, {
                cause: error,
              }),
            );
          }
        }
        if (!stopped) timer = setTimeout(tick, interval);
      })();
    };
    if (options.immediate === false) timer = setTimeout(tick, interval);
    else tick();
    return {
      stop: async () => {
        stopped = true;
        if (timer !== undefined) clearTimeout(timer);
        await running;
      },
    };
  }

  private report(item: MalformedItem): void {
    const key = JSON.stringify([item.mesh, item.version, item.service, item.reason]);
    if (this.reported.has(key)) return;
    this.reported.add(key);
    try {
      this.onMalformed(item);
    } catch {
      // A reporting callback must not break the reader.
    }
  }

  private async send<T>(operation: string, command: () => Promise<T>): Promise<T> {
    try {
      return await command();
    } catch (error) {
      throw readerErrorOf(error, this.table, operation);
    }
  }

  private async fetch(mesh: string): Promise<PlainRecord | undefined> {
    const result = await this.send("GetItem", () =>
      this.client.send(
        new GetItemCommand({
          TableName: this.table,
          Key: { mesh: { S: mesh } },
          ConsistentRead: this.consistent,
        }),
      ),
    );
    return result.Item === undefined ? undefined : fromAttributeMap(result.Item);
  }

  private async refreshNow(): Promise<SnapshotDiff> {
    const { probes, requests } = await this.probe.run(this.fixedMeshes);
    const before = this.current.meshViews;
    const views = new Map<string, MeshView>();
    const known = new Map<string, Probe>();
    const moved: string[] = [];
    for (const [mesh, probe] of probes) {
      const last = this.known.get(mesh);
      if (last !== probe) {
        moved.push(mesh);
      } else {
        known.set(mesh, last);
        const view = before.get(mesh);
        if (view !== undefined) views.set(mesh, view);
      }
    }
    await inPool(moved, this.concurrency, async (mesh) => {
      const raw = await this.fetch(mesh);
      const previous = before.get(mesh);
      if (raw === undefined) return; // deleted since the probe
      const { view, issues } = meshViewOf(raw);
      for (const issue of issues) this.report(issue);
      // What was fetched, not what was probed: after a stale read the next probe fetches again.
      known.set(mesh, probeOf(raw));
      if (view === undefined) {
        // Skipped: keep the last good view (a bad write must not blank a mesh's names).
        if (previous !== undefined) views.set(mesh, previous);
        return;
      }
      const newer =
        previous === undefined ||
        view.incarnation !== previous.incarnation ||
        view.version >= previous.version;
      // An eventually consistent read may return an older version than the snapshot holds.
      views.set(mesh, newer ? view : previous);
    });
    const diff = diffSnapshots(before, views);
    this.current = new VipSnapshot(views);
    this.known = known;
    this.refreshed = true;
    this.stats = { probeRequests: requests, fetches: moved.length, meshes: views.size };
    return diff;
  }
}
