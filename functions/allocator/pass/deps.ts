import type { VipPool } from "../../domain/pool.ts";
import type {
  ClaimsPort,
  ItemRevision,
  MeshSource,
  PoolPort,
  VipItemStore,
} from "../../store/ports.ts";
import type { PassBudget } from "../continuation/budget.ts";
import type { Telemetry } from "../telemetry.ts";
import type { AddressFinder } from "./address-finder.ts";
import type { BatchIngresses } from "./batch-ingresses.ts";
import type { ServiceSetView } from "./service-set-view.ts";

/** The stores a mesh pass works on. */
export interface PassPorts {
  readonly source: MeshSource;
  readonly vipItems: VipItemStore;
  /** The claims and the range's cursor (the pass never reads the sweep's position). */
  readonly claims: ClaimsPort & PoolPort;
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
