import {
  addressKey,
  type ClaimWrite,
  decodeAddress,
  decodeService,
  type Item,
  poolKey,
  RENUMBERINGS_KEY,
  STREAM_LAG_KEY,
  SWEEP_KEY,
  serviceKey,
  WAITING_KEY,
} from "./claim-items.ts";
import {
  adoptWrites,
  claimWrites,
  formerHintWrite,
  membershipWrites,
  orphanAddressWrite,
  releaseWrites,
  removeMembershipWrite,
} from "./claim-writes.ts";
import type {
  AddressClaim,
  AdoptRequest,
  ClaimOutcome,
  ClaimRequest,
  ClaimStore,
  ClaimsPage,
  ClaimWriteResult,
  ItemRevision,
  LeaveRequest,
  MembershipRequest,
  MeshRange,
  PassState,
  ReleaseRequest,
  ScannedClaim,
  ServiceClaim,
  StreamLagNote,
  SweepState,
  WaitingRequest,
} from "./ports.ts";
import {
  counterOf,
  counterWrite,
  cursorWrite,
  decodeMeshRange,
  decodeStreamLag,
  decodeSweepState,
  meshRangeKey,
  meshRangeWrite,
  streamLagWrite,
  sweepStateWrite,
  waitingEntries,
  waitingMeshes,
  waitingWrite,
} from "./state-items.ts";

/**
 * What a claims table does: reads, and writes that are all-or-nothing with their conditions.
 * Its adapters: `DynamoClaimTable` (dynamo-claim-table.ts) and the tests' in-memory table.
 */
export interface ClaimTable {
  /** Strongly consistent reads of `keys` (missing keys are absent from the result). */
  get(operation: string, keys: readonly string[], consistent?: boolean): Promise<Item[]>;
  /**
   * One write (UpdateItem/PutItem/DeleteItem, returning the item after it) or several (one
   * transaction). When a condition fails nothing is written and `failed` names the writes whose
   * condition failed.
   */
  write(operation: string, writes: readonly ClaimWrite[]): Promise<WriteOutcome>;
  /** Up to `limit` items with keys after `after`, strongly consistent; `next`: the last key read. */
  scan(
    operation: string,
    after: string | undefined,
    limit: number,
    consistent?: boolean,
  ): Promise<{ items: Item[]; next: string | undefined }>;
}

export type WriteOutcome =
  | { readonly ok: true; readonly item: Item | undefined }
  | {
      readonly ok: false;
      readonly failed: ReadonlySet<number>;
      /** The items failed conditions found, by write, where the engine returned them. */
      readonly found: ReadonlyMap<number, Item>;
    };

/**
 * The claim store's logic (not an adapter: no engine here) over any claims table, DynamoDB
 * (`DynamoClaimTable`) or memory (the test double), for all four of its ports (claims, pass
 * state, pool, sweep position); decision 157.
 * The writes come from claim-items.ts; a failed condition is answered with the service claim it
 * found (returned by the write at no read cost; read again only when the engine returned none),
 * so the caller learns what it found.
 */
export class ClaimStoreLogic implements ClaimStore {
  constructor(
    protected readonly table: ClaimTable,
    private readonly newId: () => string,
  ) {}

  // --- ClaimsPort: service and address claims, memberships ----------------------------------

  async getServices(
    services: readonly string[],
    consistent = true,
  ): Promise<Map<string, ServiceClaim>> {
    const keys = [...new Set(services)].map(serviceKey);
    const out = new Map<string, ServiceClaim>();
    for (const item of await this.table.get("claims.getServices", keys, consistent)) {
      const claim = decodeService(item);
      out.set(claim.service, claim);
    }
    return out;
  }

  async getAddresses(vips: readonly string[]): Promise<Map<string, AddressClaim>> {
    const keys = [...new Set(vips)].map(addressKey);
    const out = new Map<string, AddressClaim>();
    for (const item of await this.table.get("claims.getAddresses", keys)) {
      const claim = decodeAddress(item);
      out.set(claim.vip, claim);
    }
    return out;
  }

  async getRenumberings(): Promise<number> {
    const [item] = await this.table.get("claims.getRenumberings", [RENUMBERINGS_KEY]);
    return typeof item?.moves === "number" ? item.moves : 0;
  }

  async putMembership(request: MembershipRequest): Promise<ClaimWriteResult> {
    const outcome = await this.table.write("claims.join", membershipWrites(request));
    if (outcome.ok) return { written: true, claim: undefined };
    return { written: false, claim: await this.serviceFound(request.service, outcome.found) };
  }

  async claimAddress(request: ClaimRequest): Promise<ClaimOutcome> {
    const { writes, serviceIndex } = claimWrites(request, this.newId());
    const operation = request.moveFrom === undefined ? "claims.claimNew" : "claims.moveClaim";
    const outcome = await this.table.write(operation, writes);
    if (outcome.ok) return "ok";
    return outcome.failed.has(serviceIndex) ? "service-changed" : "address-taken";
  }

  async removeMembership(request: LeaveRequest): Promise<ClaimWriteResult> {
    const outcome = await this.table.write("claims.leave", [removeMembershipWrite(request)]);
    if (outcome.ok) {
      return {
        written: true,
        claim: outcome.item === undefined ? undefined : decodeService(outcome.item),
      };
    }
    return { written: false, claim: await this.serviceFound(request.service, outcome.found) };
  }

  async release(request: ReleaseRequest): Promise<boolean> {
    for (const vip of request.former ?? []) {
      // A failed condition: another service owns it now (reclaimed after an earlier release).
      await this.table.write("claims.hintFormer", [
        formerHintWrite(request.service, vip, request.nowMs),
      ]);
    }
    return (await this.table.write("claims.release", releaseWrites(request))).ok;
  }

  async scan(after: string | undefined, limit: number, consistent = true): Promise<ClaimsPage> {
    const page = await this.table.scan("claims.scan", after, limit, consistent);
    const items: ScannedClaim[] = [];
    for (const item of page.items) {
      const key = String(item.pk);
      if (key.startsWith("svc#")) items.push({ key, service: decodeService(item) });
      else if (key.startsWith("addr#")) items.push({ key, address: decodeAddress(item) });
    }
    return { items, next: page.next };
  }

  async dropOrphanAddress(address: AddressClaim): Promise<boolean> {
    const outcome = await this.table.write("claims.dropAddress", [
      orphanAddressWrite(address.vip, address.owner, address.claimId),
    ]);
    return outcome.ok;
  }

  async adopt(request: AdoptRequest): Promise<ClaimOutcome> {
    const { writes, serviceIndex } = adoptWrites(
      request.service,
      request.vip,
      this.newId(),
      request.nowMs,
    );
    const outcome = await this.table.write("claims.adopt", writes);
    if (outcome.ok) return "ok";
    return outcome.failed.has(serviceIndex) ? "service-changed" : "address-taken";
  }

  // --- PassStatePort: the waiting list and the meshes' range records ----------------------

  async getWaiting(): Promise<string[]> {
    const [item] = await this.table.get("claims.getWaiting", [WAITING_KEY]);
    return waitingMeshes(item);
  }

  async setWaiting(mesh: string, request: WaitingRequest): Promise<boolean> {
    return (await this.table.write("claims.setWaiting", [waitingWrite(mesh, request)])).ok;
  }

  async getPassState(meshes: readonly string[]): Promise<PassState> {
    const keys = [WAITING_KEY, ...[...new Set(meshes)].map(meshRangeKey)];
    const ranges = new Map<string, MeshRange>();
    let waiting = new Map<string, ItemRevision | undefined>();
    for (const item of await this.table.get("claims.getPassState", keys)) {
      if (item.pk === WAITING_KEY) waiting = waitingEntries(item);
      const record = decodeMeshRange(item);
      if (record !== undefined && item.pk === meshRangeKey(record.mesh)) {
        ranges.set(record.mesh, record.range);
      }
    }
    return { waiting, ranges };
  }

  async setMeshRange(
    mesh: string,
    cidr: string,
    revision: ItemRevision,
    seen?: string,
  ): Promise<boolean> {
    const write = meshRangeWrite(mesh, cidr, revision, seen);
    return (await this.table.write("claims.setMeshRange", [write])).ok;
  }

  // --- PoolPort: the range's cursor and counter -------------------------------------------

  async readCursor(cidr: string): Promise<bigint> {
    const [item] = await this.table.get("claims.readCursor", [poolKey(cidr)]);
    const next = item?.next;
    return typeof next === "string" && /^\d+$/.test(next) ? BigInt(next) : 0n;
  }

  async advanceCursor(cidr: string, next: bigint, newlyClaimed: number): Promise<number> {
    const outcome = await this.table.write("claims.advanceCursor", [
      cursorWrite(cidr, next, newlyClaimed),
    ]);
    return outcome.ok ? Number(outcome.item?.claimed ?? 0) : 0;
  }

  async readCounter(cidr: string): Promise<number> {
    const [item] = await this.table.get("claims.readCursor", [poolKey(cidr)]);
    return counterOf(item);
  }

  async setCounter(cidr: string, expected: number, claimed: number): Promise<boolean> {
    const outcome = await this.table.write("claims.setCounter", [
      counterWrite(cidr, expected, claimed),
    ]);
    return outcome.ok;
  }

  // --- SweepPositionPort -------------------------------------------------------------------

  async getSweepState(): Promise<SweepState | undefined> {
    const [item] = await this.table.get("claims.getSweepState", [SWEEP_KEY]);
    return decodeSweepState(item);
  }

  async putSweepState(state: SweepState, expectedVersion: number | undefined): Promise<boolean> {
    const outcome = await this.table.write("claims.putSweepState", [
      sweepStateWrite(state, expectedVersion),
    ]);
    return outcome.ok;
  }

  async noteStreamLag(note: StreamLagNote): Promise<void> {
    // A later note already stored fails the condition: nothing to do.
    await this.table.write("claims.noteStreamLag", [streamLagWrite(note)]);
  }

  async streamLag(): Promise<StreamLagNote | undefined> {
    const [item] = await this.table.get("claims.streamLag", [STREAM_LAG_KEY]);
    return decodeStreamLag(item);
  }

  /**
   * The service claim a failed write found: its item among what the failed conditions returned
   * (the service claim is the first write of a join and the only one of a leave), else read.
   */
  private async serviceFound(
    service: string,
    found: ReadonlyMap<number, Item>,
  ): Promise<ServiceClaim | undefined> {
    const item = found.get(0);
    if (item !== undefined && item.pk === serviceKey(service)) return decodeService(item);
    return (await this.getServices([service])).get(service);
  }
}
