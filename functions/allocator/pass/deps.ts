import type { VipPool } from "../../domain/pool.ts";
import type { VipItem } from "../../domain/types.ts";
import type {
  ClaimsPort,
  ItemRevision,
  MeshSource,
  PassStatePort,
  PoolPort,
  VipItemStore,
} from "../../store/ports.ts";
import type { Telemetry } from "../telemetry.ts";
import type { AddressFinder } from "./address-finder.ts";
import type { BatchIngresses } from "./service-set-view.ts";
import { type ServiceSetView, tablesView } from "./service-set-view.ts";

/** The stores a mesh pass works on. */
export interface PassPorts {
  readonly source: MeshSource;
  readonly vipItems: VipItemStore;
  /** The claims and the range's cursor (the pass never reads the sweep's position). */
  readonly claims: ClaimsPort & PoolPort;
  /** The waiting list and the range records (which meshes need a pass). */
  readonly passState: PassStatePort;
  readonly telemetry: Telemetry;
}

/** What every mesh pass needs from the configuration and the runtime (clock, ids, sleeps). */
export interface PassSettings {
  readonly pool: VipPool;
  readonly quarantineSeconds: number;
  readonly maxAttempts: number;
  readonly now: () => number;
  readonly newId: () => string;
  readonly sleep: (ms: number) => Promise<void>;
  readonly random: () => number;
}

/** Everything one mesh pass uses (see {@link createInvocation} for the shared parts). */
export interface ReconcileDeps extends PassPorts, PassSettings {
  /** The batch's shared read of the ingresses; absent: each pass reads them itself. */
  readonly ingresses?: BatchIngresses;
  /**
   * Where the pass gets the mesh's service set (the membership index, incremental); absent:
   * the full recompute from the tables.
   */
  readonly view?: ServiceSetView;
  /**
   * A finder shared by the meshes of one invocation (the invocation flushes it). When absent,
   * each attempt of a pass uses its own and flushes it.
   */
  readonly addresses?: AddressFinder;
  /**
   * The mesh's entry on the waiting list as the caller read it before the pass (the batch's
   * guard): the item revision it names (undefined: an entry that names none). Absent: not on
   * the list, or not read. A pass that leaves the item not waiting removes such an entry
   * (decision 111).
   */
  readonly waitingEntry?: { readonly revision: ItemRevision | undefined };
  /**
   * The invocation's time for claims (decision 160); absent: no limit (the CLI, the tests). A
   * pass that runs out writes what it has and defers the rest to a continuation.
   */
  readonly budget?: PassBudget;
}

/** Full-jitter backoff: random(0, min(cap, base * 2^attempt)). */
export function backoffMs(attempt: number, random: () => number, baseMs = 25, capMs = 1000) {
  return Math.floor(random() * Math.min(capMs, baseMs * 2 ** attempt));
}

export type MeshAction = "created" | "updated" | "deleted" | "unchanged" | "absent";

/** What one mesh pass did. */
export interface MeshOutcome {
  readonly mesh: string;
  readonly action: MeshAction;
  readonly version: number | undefined;
  readonly added: Readonly<Record<string, string>>;
  readonly removed: Readonly<Record<string, string>>;
  readonly unallocated: readonly string[];
  readonly attempts: number;
  /** Of `added`, the services the item listed before at another VIP: service -> that VIP. */
  readonly renumbered?: Readonly<Record<string, string>>;
  /**
   * Meshes whose items list unallocated services, to reconcile again now: this pass freed
   * addresses and there is no quarantine to wait for.
   */
  readonly wake?: readonly string[];
  /** The item the pass left (absent: none, or a deleted mesh's): its revision and range. */
  readonly left?: ItemLeft;
  /** The pass wrote the item into another range than it found it in, or created it. */
  readonly rangeChanged?: boolean;
  /**
   * The pass ran out of the invocation's time and wrote what it had: the item lists services
   * still `pending`, or still at VIPs outside the range; a continuation finishes (decision 160).
   */
  readonly deferred?: true;
}

/** The revision and range of the item a pass left (what the range record describes). */
export interface ItemLeft {
  readonly incarnation: string;
  readonly version: number;
  readonly cidr: string;
}

/** What the range record needs of an item. */
export function itemLeft(item: ItemLeft): ItemLeft {
  return { incarnation: item.incarnation, version: item.version, cidr: item.cidr };
}

/** One attempt of a pass. */
export interface Attempt {
  readonly outcome: MeshOutcome;
  /** False when this pass wrote but must run again (inputs moved, or addresses were freed). */
  readonly settled: boolean;
}

export function settled(result: MeshOutcome): Attempt {
  return { outcome: result, settled: true };
}

export function outcome(
  mesh: string,
  action: MeshAction,
  version: number | undefined,
  added: Record<string, string>,
  removed: Record<string, string>,
  unallocated: string[],
  attempts: number,
): MeshOutcome {
  return { mesh, action, version, added, removed, unallocated, attempts };
}

/** Where the pass reads the mesh's service set: its view, or the full recompute. */
export function viewOf(deps: ReconcileDeps): ServiceSetView {
  return deps.view ?? tablesView(deps.source, deps.ingresses);
}

/**
 * After a write, the inputs are read again: the version condition protects against a stale
 * *item*, not against stale *tables*. A concurrent pass that read newer tables may have found
 * nothing to change and written nothing, so the last writer must check that what it wrote is
 * still what the tables say; if not, it goes round again.
 */
export async function inputsStill(
  mesh: string,
  deps: ReconcileDeps,
  exists: boolean,
  services: readonly string[],
): Promise<boolean> {
  if ((await deps.source.meshExists(mesh)) !== exists) return false;
  if (!exists) return true;
  return await viewOf(deps).still(mesh, services);
}

/**
 * The fence of decision 041, the one way the allocator moves an item without changing its
 * content: the item is rewritten at version `past`, conditional on the revision it has now,
 * so a pass about to write a version up to `past` loses its condition, re-reads and asserts
 * again what it lists; a membership asserted for such a version may then be left. Undefined
 * when the item moved on meanwhile (the caller decides on the new one).
 */
export async function fenceItem(
  vipItems: VipItemStore,
  item: VipItem,
  past: number,
  nowMs: number,
): Promise<VipItem | undefined> {
  const fenced: VipItem = { ...item, version: past, updatedAt: new Date(nowMs).toISOString() };
  const write = await vipItems.put(fenced, item);
  return write.written ? fenced : undefined;
}

/**
 * The time an invocation gives its passes (decision 160). Lambda stops an invocation at its
 * timeout; a pass that is still claiming then would be killed mid-way, count as an error and
 * lean on retries. So a pass claims new addresses only while the budget lasts, then writes what
 * it has (the services it could not reach wait in the item, `pending`) and hands the rest to a
 * continuation: the meshes it defers are collected here for the invocation to continue.
 *
 * The budget ends `reserve` before the invocation's end, for what follows the claims: the item
 * write and the leaves, the other passes' commits, the batch's bookkeeping and the continuation
 * request itself.
 */

/** Share of the invocation's time kept back from the claims. */
const RESERVE_SHARE = 0.25;
/** Bounds of that reserve, in milliseconds. */
const MIN_RESERVE_MS = 1_000;
const MAX_RESERVE_MS = 15_000;

export class PassBudget {
  /** Meshes a pass of this invocation left to a continuation, in the order deferred. */
  readonly deferred = new Set<string>();

  private constructor(
    /** Epoch ms after which no pass starts a new claim beyond its minimum. */
    readonly stopAt: number,
    private readonly now: () => number,
  ) {}

  /** The budget of an invocation that may still run `remainingMs` (Lambda's remaining time). */
  static of(remainingMs: number, now: () => number): PassBudget {
    const reserve = Math.min(MAX_RESERVE_MS, Math.max(MIN_RESERVE_MS, remainingMs * RESERVE_SHARE));
    return new PassBudget(now() + remainingMs - reserve, now);
  }

  /** No time left for new claims (each pass still makes its minimum, so it always progresses). */
  expired(): boolean {
    return this.now() >= this.stopAt;
  }

  /** `mesh` has work left that a continuation must finish. */
  defer(mesh: string): void {
    this.deferred.add(mesh);
  }
}

/** The part of Lambda's context the allocator uses. */
export interface InvocationContext {
  /** How long the invocation may still run (Lambda's timeout, counted down). */
  getRemainingTimeInMillis(): number;
  /** The function's ARN as invoked: a continuation invokes the same (decision 160). */
  readonly invokedFunctionArn?: string;
}
