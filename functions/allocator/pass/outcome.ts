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
