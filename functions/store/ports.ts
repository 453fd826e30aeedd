import type { InputIssue } from "../domain/errors.ts";
import type { DataplaneRecord, Membership, VipItem } from "../domain/types.ts";

/**
 * Where the allocator reads its inputs. "The dataplanes of a mesh" and "the ingresses that
 * advertise for a mesh" sit behind this one port so an index can replace the re-read later.
 */
export interface MeshSource {
  meshExists(mesh: string): Promise<boolean>;
  /** Every dataplane item stored under `mesh`, ingresses included. */
  dataplanesOf(mesh: string): Promise<DataplaneRecord[]>;
  /** Every ingress dataplane, whatever mesh it is stored under, that may advertise for `mesh`. */
  ingressesFor(mesh: string): Promise<DataplaneRecord[]>;
  /** Items the adapter could not decode at all (reported, then left out). */
  drainIssues(): InputIssue[];
  /** Forgets anything cached, so the next reads see the tables as they are now. */
  refresh?(): void;
}

/** The public per-mesh VIP items. Writes are conditional on the version read before. */
export interface VipItemStore {
  /** Strongly consistent read. */
  get(mesh: string): Promise<VipItem | undefined>;
  /**
   * Writes `item` if the stored version is still `expectedVersion` (undefined: the item must
   * not exist). Throws `VersionConflictError` otherwise. Returns the item's size in bytes.
   */
  put(item: VipItem, expectedVersion: number | undefined): Promise<number>;
  /** Deletes the item if its version is still `expectedVersion`; else `VersionConflictError`. */
  delete(mesh: string, expectedVersion: number): Promise<void>;
}

/** A service's global claim: its one VIP and the meshes that use it. */
export interface ServiceClaim {
  readonly service: string;
  readonly vip: string;
  readonly meshes: ReadonlyMap<string, Membership>;
  /** Epoch ms when the service left its last mesh; absent while any mesh uses it. */
  readonly releasedAt: number | undefined;
}

/** An address's claim: who owns it. Absent = free. */
export interface AddressClaim {
  readonly vip: string;
  readonly owner: string;
  /** Random per claim write, so a reclaim can be conditional on the exact claim it saw. */
  readonly claimId: string;
  /** Copy of the owner's `releasedAt` (a hint that lets the cursor skip reading the owner). */
  readonly releasedAt: number | undefined;
}

/** A free address, or an address whose owner's quarantine is over. */
export interface AddressCandidate {
  readonly vip: string;
  readonly offset: bigint;
  /** Set when the address is taken over from a released service. */
  readonly reclaimFrom?: AddressClaim;
}

export type ClaimOutcome = "ok" | "address-taken" | "service-changed";

/**
 * The allocator's private, global claims. Every method is one conditional write or one
 * transaction, so concurrent invocations cannot both win an address or a service.
 */
export interface ClaimStore {
  getServices(services: readonly string[]): Promise<Map<string, ServiceClaim>>;
  getAddresses(vips: readonly string[]): Promise<Map<string, AddressClaim>>;
  /**
   * Records that `mesh` uses `service` at `vip` (the claim must still hold `vip`). When the
   * claim was released, also ends its quarantine.
   */
  join(
    service: string,
    vip: string,
    mesh: string,
    membership: Membership,
    wasReleased: boolean,
  ): Promise<boolean>;
  /** Claims `candidate` for a service that has no claim yet (address and service together). */
  claimNew(
    service: string,
    candidate: AddressCandidate,
    mesh: string,
    membership: Membership,
    nowMs: number,
    reclaimCutoffMs: number,
  ): Promise<ClaimOutcome>;
  /** Moves an existing claim from `oldVip` (outside the range) to `candidate`. */
  moveClaim(
    service: string,
    oldVip: string,
    candidate: AddressCandidate,
    mesh: string,
    membership: Membership,
    nowMs: number,
    reclaimCutoffMs: number,
  ): Promise<ClaimOutcome>;
  /**
   * Removes `mesh`'s membership if it was asserted by `incarnation` at a version up to
   * `upToVersion`; when no mesh is left, the service is released (quarantine starts).
   */
  leave(
    service: string,
    mesh: string,
    incarnation: string,
    upToVersion: number,
    nowMs: number,
  ): Promise<"released" | "left" | "kept">;
  /** How many claims have moved to another VIP, ever (renumberings after range changes). */
  getRenumberings(): Promise<number>;
  /** The next-fit cursor of a range (offset to probe first). */
  readCursor(cidr: string): Promise<bigint>;
  /** Moves the cursor and adds `newlyClaimed` to the range's claim count; returns the count. */
  advanceCursor(cidr: string, next: bigint, newlyClaimed: number): Promise<number | undefined>;
}
