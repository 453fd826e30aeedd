import type { Contribution, ContributorKey, ContributorKind } from "../domain/contributions.ts";
import type { InputIssue } from "../domain/errors.ts";
import type { DataplaneRecord, Membership, VipItem } from "../domain/types.ts";

/**
 * One page of a paged read. `next` is an opaque position: the key of the last item returned,
 * so a caller can stop after any item and continue from it later (undefined: nothing after).
 */
export interface Page<T> {
  readonly items: readonly T[];
  readonly next: string | undefined;
}

/** Dataplane items read, and the items that could not be decoded at all (left out). */
export interface SourceRead {
  readonly records: readonly DataplaneRecord[];
  readonly issues: readonly InputIssue[];
}

/**
 * Where the allocator reads its inputs, statelessly: every call reads the tables as they are
 * now (strongly consistent, unless a `consistent` argument says false: the repair sweep's
 * detection reads, whose findings are read again before anything is changed). (A batch shares one read of the ingresses: see allocator/pass/service-set-view.ts.)
 */
export interface MeshSource {
  /** Whether the deployment has the optional external-services table. */
  readonly externalServices: boolean;
  meshExists(mesh: string): Promise<boolean>;
  /** Every external service stored under `mesh` (records of kind `external-service`; none without the table). */
  externalServicesOf(mesh: string, consistent?: boolean): Promise<SourceRead>;
  /** Every dataplane item stored under `mesh`, ingresses included. */
  dataplanesOf(mesh: string, consistent?: boolean): Promise<SourceRead>;
  /** Every ingress dataplane, whatever mesh it is stored under. */
  ingresses(consistent?: boolean): Promise<SourceRead>;
  /** The given dataplanes (and external services, by their key's kind) as stored now (absent ones are left out). */
  dataplanes(keys: readonly ContributorKey[]): Promise<SourceRead>;
  /** Every dataplane of the table, then every external service, a page at a time (the index builder's read; never on the event path). */
  allDataplanes(): AsyncIterable<SourceRead>;
  /**
   * Up to `limit` dataplanes after the position `after` (a backfill's resumable read; never on
   * the event path), then the external services, as one sequence of positions. `next`: the position after the last item read, undefined at the end.
   */
  dataplanePage(
    after: string | undefined,
    limit: number,
  ): Promise<SourceRead & { readonly next: string | undefined }>;
  /** Names in the meshes table, a page at a time after `after` (the repair sweep's read). */
  meshPage(after: string | undefined, limit: number, consistent?: boolean): Promise<Page<string>>;
}

/** What the membership index records for one contributor: what it contributes now. */
export interface IndexedContributor {
  readonly key: ContributorKey;
  readonly contributions: readonly Contribution[];
  /** Fixed-width stream sequence number of the record that set it ("" if set by a rebuild). */
  readonly sequence: string;
  /** Bumped by every write of the record; writes are conditional on it. */
  readonly version: number;
  /**
   * (mesh, service) pairs whose mesh pass this contributor's records require and that has not
   * completed (decision 073; absent: none).
   */
  readonly pending?: readonly Contribution[];
}

/** Sets the pending pairs of a contributor's record, if it is still at `version`. */
export interface PendingUpdate {
  readonly key: ContributorKey;
  readonly version: number;
  readonly pending: readonly Contribution[];
}

/** One contributor entry: `dataplane` puts `service` in `mesh`'s service set. */
export interface IndexEntry extends Contribution {
  readonly dataplane: ContributorKey;
}

/**
 * A change to the index for one contributor: its entries to add and remove (idempotent,
 * batched), then, if given, its record, written only if its version is still `expectedVersion`
 * (undefined: there must be none). A record with no contributions is deleted.
 */
export interface IndexWrite {
  readonly key: ContributorKey;
  readonly add: readonly Contribution[];
  readonly remove: readonly Contribution[];
  readonly record?: {
    readonly contributions: readonly Contribution[];
    readonly sequence: string;
    readonly expectedVersion: number | undefined;
    /** Pairs whose mesh pass is pending (decision 073); written with the record. */
    readonly pending?: readonly Contribution[];
  };
}

/**
 * The allocator's membership index, derived from the input tables: for every (mesh,
 * service) its contributors, and for every contributor what it contributes. Never read by
 * downstream services.
 */
export interface MembershipIndex {
  /** The records of the given contributors, by `contributorId` (absent: contributes nothing). */
  getContributors(
    keys: readonly ContributorKey[],
    consistent?: boolean,
  ): Promise<Map<string, IndexedContributor>>;
  /** Applies the writes; returns the ids of the contributors whose record had changed (lost). */
  write(writes: readonly IndexWrite[]): Promise<Set<string>>;
  /** Which of `services` have at least one contributor in `mesh` (strongly consistent). */
  present(mesh: string, services: readonly string[]): Promise<Set<string>>;
  /**
   * The first contributor (lowest sort key) of each of `services` in `mesh`, strongly
   * consistent; a service with none is left out. The pass decision's read (decision 073).
   */
  firstContributors(
    mesh: string,
    services: readonly string[],
  ): Promise<Map<string, ContributorKey>>;
  /**
   * Sets the pending pairs of each record still at its `version` (the version is not bumped);
   * a record that moved on is left as it is (its writer carried the pairs over).
   */
  setPending(updates: readonly PendingUpdate[]): Promise<void>;
  /** Every service with a contributor in `mesh`, sorted. */
  servicesOf(mesh: string): Promise<string[]>;
  /** Every contributor entry of `mesh` (the repair sweep's read). */
  entriesOf(mesh: string, consistent?: boolean): Promise<IndexEntry[]>;
  /**
   * The records of every dataplane stored under `mesh` (the repair sweep's read); with
   * `kind`, of every contributor of that kind (external services) stored under it.
   */
  recordsOf(
    mesh: string,
    consistent?: boolean,
    kind?: ContributorKind,
  ): Promise<IndexedContributor[]>;
  /** Every entry and every contributor's record, a page at a time (builder and checks only). */
  scan(): AsyncIterable<{ entries: IndexEntry[]; dataplanes: IndexedContributor[] }>;
}

/**
 * What a conditional write of a VIP item expects to find: the version *and* the incarnation read
 * before the new content was computed. The version alone is not enough: a mesh deleted and
 * created again starts a new incarnation at version 1, and a pass held since the old life must
 * not write over it (ABA).
 */
export interface ItemRevision {
  readonly version: number;
  readonly incarnation: string;
}

/**
 * What a conditional write of a VIP item did. A failed condition is an answer, not an error
 * (the convention of every port: claims answer the same way): `found` is the item the engine
 * found when the condition failed, returned with the write's response at no read cost, or
 * `"unknown"` when the engine returned none (no item there, or an engine that does not return
 * it): the caller reads the item again when it needs it.
 */
export type ItemWriteResult =
  | { readonly written: true; readonly bytes: number }
  | { readonly written: false; readonly found: VipItem | "unknown" };

/** The public per-mesh VIP items. Writes are conditional on the revision read before. */
export interface VipItemStore {
  /** Strongly consistent read. */
  get(mesh: string): Promise<VipItem | undefined>;
  /**
   * Writes `item` if the stored item is still at `expected` (version and incarnation;
   * undefined: the item must not exist); `bytes` is the item's size. Throws only for what is
   * not a lost race (`VipItemTooLargeError`, the engine's errors).
   */
  put(item: VipItem, expected: ItemRevision | undefined): Promise<ItemWriteResult>;
  /** Deletes the item if it is still at `expected` (`bytes` is 0). */
  delete(mesh: string, expected: ItemRevision): Promise<ItemWriteResult>;
  /** Meshes that have an item, a page at a time after `after` (the repair sweep's read). */
  meshPage(after: string | undefined, limit: number, consistent?: boolean): Promise<Page<string>>;
  /**
   * Whole items, a page at a time after `after` (the repair sweep's read); `malformed` names the
   * meshes whose item could not be decoded (left out).
   */
  itemPage(
    after: string | undefined,
    limit: number,
    consistent?: boolean,
  ): Promise<Page<VipItem> & { readonly malformed: readonly string[] }>;
}

/** A service's global claim: its one VIP and the meshes that use it. */
export interface ServiceClaim {
  readonly service: string;
  readonly vip: string;
  readonly meshes: ReadonlyMap<string, Membership>;
  /** Epoch ms when the service left its last mesh; absent while any mesh uses it. */
  readonly releasedAt: number | undefined;
  /** Addresses it held before a renumbering, still owned by it (sorted; absent: none). */
  readonly former?: readonly string[];
}

/** An address's claim: who owns it. Absent = free. */
export interface AddressClaim {
  readonly vip: string;
  readonly owner: string;
  /** Random per claim write, so a reclaim can be conditional on the exact claim it saw. */
  readonly claimId: string;
  /** Copy of the owner's `releasedAt` (a hint that lets the cursor skip reading the owner). */
  readonly releasedAt: number | undefined;
  /** The owner has moved on to another address (a renumbering); this one is a former one. */
  readonly former?: true;
}

/** A free address, or an address whose owner's quarantine is over. */
export interface AddressCandidate {
  readonly vip: string;
  readonly offset: bigint;
  /** Set when the address is taken over from a released service. */
  readonly reclaimFrom?: AddressClaim;
  /** The reclaim cutoff it was found by (the quarantine was over then, so at the claim too). */
  readonly reclaimCutoffMs?: number;
}

export type ClaimOutcome = "ok" | "address-taken" | "service-changed";

/** `mesh` uses `service` at `vip`; `resume` when the claim was released (ends its quarantine). */
export interface MembershipRequest {
  readonly service: string;
  readonly vip: string;
  readonly mesh: string;
  readonly membership: Membership;
  readonly resume: boolean;
}

/** Take `candidate` for `service`: a new claim, or (with `moveFrom`) a move of its claim. */
export interface ClaimRequest {
  readonly service: string;
  readonly candidate: AddressCandidate;
  readonly mesh: string;
  readonly membership: Membership;
  readonly nowMs: number;
  /** A released address may be reclaimed only if released at or before this time. */
  readonly reclaimCutoffMs: number;
  /** The VIP the service's claim holds now (outside the range): the claim moves. */
  readonly moveFrom?: string;
}

/** Remove `mesh`'s membership if `incarnation` asserted it at a version up to `upToVersion`. */
export interface LeaveRequest {
  readonly service: string;
  readonly mesh: string;
  readonly incarnation: string;
  readonly upToVersion: number;
}

/** Start the quarantine of a service claim that no mesh uses. */
export interface ReleaseRequest {
  readonly service: string;
  readonly vip: string;
  readonly nowMs: number;
  /** The service's former addresses (from its claim): hinted for reclaim first. */
  readonly former?: readonly string[];
}

/** Whether a conditional write was written, and the service claim after it (or as found). */
export interface ClaimWriteResult {
  readonly written: boolean;
  readonly claim: ServiceClaim | undefined;
}

/** One item of the claims table as the sweep reads it: a service or an address claim. */
export type ScannedClaim =
  | { readonly key: string; readonly service: ServiceClaim }
  | { readonly key: string; readonly address: AddressClaim };

/** One page of the claims table (items of other kinds are left out, but count for `next`). */
export interface ClaimsPage {
  readonly items: readonly ScannedClaim[];
  readonly next: string | undefined;
}

/** Where the repair sweep is in its cycle; written conditionally on `version` (one sweep advances it). */
export interface SweepState {
  readonly cycle: string; // random per cycle
  /** Epoch ms when the cycle started. */
  readonly startedAt: number;
  /** `index`: a backfill's rebuild of the membership index, a page of dataplanes at a time. */
  readonly phase: "index" | "meshes" | "items" | "claims" | "done";
  /** The last key handled in the phase (undefined: from the start). */
  readonly after: string | undefined;
  /** Meshes examined and corrections made in this cycle so far. */
  readonly meshes: number;
  readonly repairs: number;
  /** Claims phase: addresses of the range seen so far, and the counter when the phase began. */
  readonly addressesInRange: number;
  readonly counterAtStart: number | undefined;
  /** This cycle's, and the previous cycle's, difference between addresses and the counter. */
  readonly counterDelta?: number;
  readonly previousDelta?: number;
  /** Epoch ms when the cycle ended (phase `done`). */
  readonly finishedAt?: number;
  /** A backfill's cycle: its corrections are expected (not counted for the alarm). */
  readonly backfill?: boolean;
  readonly version: number;
}

/**
 * The allocator's private, global claims, as primitive conditional operations: each is one
 * conditional write or one transaction, so concurrent invocations cannot both win an address or
 * a service, and each says what it found. What to make of it is decided in the allocator.
 */
export interface ClaimsPort {
  /** Strongly consistent unless `consistent` is false (the sweep's detection reads). */
  getServices(
    services: readonly string[],
    consistent?: boolean,
  ): Promise<Map<string, ServiceClaim>>;
  getAddresses(vips: readonly string[]): Promise<Map<string, AddressClaim>>;
  /** How many claims have moved to another VIP, ever (renumberings after range changes). */
  getRenumberings(): Promise<number>;
  putMembership(request: MembershipRequest): Promise<ClaimWriteResult>;
  claimAddress(request: ClaimRequest): Promise<ClaimOutcome>;
  removeMembership(request: LeaveRequest): Promise<ClaimWriteResult>;
  /** True when released; false when the claim was not in a state to be released. */
  release(request: ReleaseRequest): Promise<boolean>;
  /** Service and address claims, a page at a time after `after` (the repair sweep's read). */
  scan(after: string | undefined, limit: number, consistent?: boolean): Promise<ClaimsPage>;
  /** Deletes an address claim whose owner has no service claim, if it is still `address`. */
  dropOrphanAddress(address: AddressClaim): Promise<boolean>;
  /** `vips adopt`: claims `vip` for `service`, both create-if-absent in one transaction. */
  adopt(request: AdoptRequest): Promise<ClaimOutcome>;
}

/** A claim adopted from another allocator's VIP map. */
export interface AdoptRequest {
  readonly service: string;
  readonly vip: string;
  readonly nowMs: number;
}

/** The waiting meshes (each entry's item revision) and the meshes' range records. */
export interface PassState {
  readonly waiting: ReadonlyMap<string, ItemRevision | undefined>;
  readonly ranges: ReadonlyMap<string, MeshRange>;
}

/** A mesh's range record: its item's range, and which item (absent: written before 112). */
export interface MeshRange {
  readonly cidr: string;
  readonly revision?: ItemRevision;
}

/** A change of a mesh's waiting entry, tied to the item a pass left (decision 111). */
export interface WaitingRequest {
  readonly waiting: boolean;
  readonly item: ItemRevision;
  /** An incarnation the caller saw on the list before it read the item (a dead one). */
  readonly seen?: string;
}

/** Which meshes need a pass whatever their presence says: the waiting list, the range records. */
export interface PassStatePort {
  /** The meshes whose item lists unallocated services. */
  getWaiting(): Promise<string[]>;
  /** The waiting list and `meshes`' range records, one strongly consistent read (055). */
  getPassState(meshes: readonly string[]): Promise<PassState>;
  /** Records that `revision` of `mesh`'s item is in `cidr` (decision 112); false: a newer stays. */
  setMeshRange(mesh: string, cidr: string, revision: ItemRevision, seen?: string): Promise<boolean>;
  /** Records whether `mesh`'s item lists unallocated services (decision 111); false: kept. */
  setWaiting(mesh: string, request: WaitingRequest): Promise<boolean>;
}

/** A range's next-fit cursor and claim counter (`pool#<cidr>` in the claims table). */
export interface PoolPort {
  /** The next-fit cursor of a range (offset to probe first). */
  readCursor(cidr: string): Promise<bigint>;
  /** Moves the cursor and adds `newlyClaimed` to the range's claim count; returns the count. */
  advanceCursor(cidr: string, next: bigint, newlyClaimed: number): Promise<number | undefined>;
  /** A range's claim counter (0 when never written). */
  readCounter(cidr: string): Promise<number>;
  /** Sets a range's claim counter if it still holds `expected`; false otherwise. */
  setCounter(cidr: string, expected: number, claimed: number): Promise<boolean>;
}

/** The event path saw its stream lag `lagMs` (past the sweep's grace) at `at` (epoch ms). */
export interface StreamLagNote {
  readonly at: number;
  readonly lagMs: number;
}

/** The sweep's position (`sweep`) and the event path's latest lag note (`stream-lag`, 132). */
export interface SweepPositionPort {
  getSweepState(): Promise<SweepState | undefined>;
  /** Writes the state if the stored one still has `expectedVersion` (undefined: none); false otherwise. */
  putSweepState(state: SweepState, expectedVersion: number | undefined): Promise<boolean>;
  /** Stores `note` unless a later one is stored. */
  noteStreamLag(note: StreamLagNote): Promise<void>;
  /** The latest lag note (strongly consistent), or undefined. */
  streamLag(): Promise<StreamLagNote | undefined>;
}

/** The whole claims table (claims, pass state, pool, sweep position): one adapter; callers take what they use. */
export interface ClaimStore extends ClaimsPort, PassStatePort, PoolPort, SweepPositionPort {}
