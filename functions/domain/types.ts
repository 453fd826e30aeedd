/** The per-mesh VIP item as downstream services read it (docs/contract.md, "Output: the VIP item of a mesh"). */
export interface VipItem {
  readonly mesh: string;
  /** 1 when created, +1 on every write; a write happens only when the content changes. */
  readonly version: number;
  /** service name -> VIP */
  readonly vips: Readonly<Record<string, string>>;
  /** The range the VIPs came from. */
  readonly cidr: string;
  /** ISO-8601 time of the last write. */
  readonly updatedAt: string;
  /** service -> reason, for services of the set that hold no VIP. */
  readonly unallocated?: Readonly<Record<string, string>>;
  /**
   * Services of the set whose address a pass has not claimed yet: it ran out of the
   * invocation's time, wrote what it had, and a continuation claims the rest (decision 160).
   * Listed neither in `vips` nor in `unallocated`; absent when empty.
   */
  readonly pending?: readonly string[];
  /**
   * The public form only (`decodeVipItem`): external services' hosts -> VIP, and the hosts
   * without one. The allocator itself keeps hosts in `vips` and `unallocated` under their
   * entry names `host/<host>` (domain/hosts.ts); the stored item lists them apart.
   */
  readonly hosts?: Readonly<Record<string, string>>;
  readonly unallocatedHosts?: Readonly<Record<string, string>>;
  /** The public form only: the hosts `pending` (as `pending` holds services). */
  readonly pendingHosts?: readonly string[];
  /**
   * Random id of this incarnation of the mesh item (a new one when a deleted mesh is created
   * again). Claim memberships carry it so a late release from a previous incarnation cannot
   * remove a membership of the new one. Not needed by readers.
   */
  readonly incarnation: string;
  /**
   * The claims' renumbering count at which every listed VIP was checked against its service's
   * claim (a claim moves only when a range change renumbers it). Not needed by readers.
   */
  readonly renumberings?: number;
  /**
   * Services this item stopped listing whose membership of the mesh may still be recorded in
   * their claim (the write that dropped them, or one before it, may not have been followed by
   * the leave). Any later pass retracts them. Not needed by readers.
   */
  readonly leaving?: readonly string[];
}

/** The content of a VIP item: what a write changes. */
export interface VipContent {
  readonly vips: Readonly<Record<string, string>>;
  readonly cidr: string;
  readonly unallocated: Readonly<Record<string, string>>;
  /** Services still waiting for a pass to claim their address (sorted). */
  readonly pending: readonly string[];
}

/**
 * A dataplane item as read from the table: its key and its raw, unvalidated attributes. With
 * `kind: "external-service"`, an external service's item from the external-services table.
 */
export interface DataplaneRecord {
  readonly mesh: string;
  readonly name: string;
  readonly kind?: "external-service";
  readonly item: unknown;
}

/** Which item version asserted a service's membership in a mesh (see {@link VipItem.incarnation}). */
export interface Membership {
  readonly incarnation: string;
  readonly version: number;
}
