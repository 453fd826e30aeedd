import { TransactionCanceledException } from "@aws-sdk/client-dynamodb";
import { recordOf } from "../domain/records.ts";
import type { Membership } from "../domain/types.ts";
import { ConditionFailed, type DocumentClient, type TransactItem } from "./document-client.ts";
import type {
  AddressCandidate,
  AddressClaim,
  ClaimOutcome,
  ClaimStore,
  ServiceClaim,
} from "./ports.ts";

export const serviceKey = (service: string): string => `svc#${service}`;
export const addressKey = (vip: string): string => `addr#${vip}`;
export const poolKey = (cidr: string): string => `pool#${cidr}`;
/** Counts claim moves (renumberings): a mesh item checked at this count lists no stale VIP. */
export const RENUMBERINGS_KEY = "renumberings";

/** Stored form of a membership: `meshes.<mesh> = {i: incarnation, v: version}`. */
function membershipValue(membership: Membership): { i: string; v: number } {
  return { i: membership.incarnation, v: membership.version };
}

/** Attribute names of the membership expressions below (`#meshes.#m.#i`, `#meshes.#m.#v`). */
function membershipNames(mesh: string): Record<string, string> {
  return { "#meshes": "meshes", "#m": mesh, "#i": "i", "#v": "v" };
}

/** Condition that never lowers the version of an existing membership of the same incarnation. */
const NOT_LOWER =
  "(attribute_not_exists(#meshes.#m) OR #meshes.#m.#i <> :inc OR #meshes.#m.#v <= :ver)";

function decodeService(item: Record<string, unknown>): ServiceClaim {
  const meshes = new Map<string, Membership>();
  const raw = item.meshes;
  if (typeof raw === "object" && raw !== null) {
    for (const [mesh, value] of Object.entries(raw as Record<string, unknown>)) {
      const m = value as { i?: unknown; v?: unknown };
      meshes.set(mesh, { incarnation: String(m.i), version: Number(m.v) });
    }
  }
  return {
    service: String(item.service),
    vip: String(item.vip),
    meshes,
    releasedAt: typeof item.releasedAt === "number" ? item.releasedAt : undefined,
  };
}

function decodeAddress(item: Record<string, unknown>): AddressClaim {
  return {
    vip: String(item.vip),
    owner: String(item.owner),
    claimId: String(item.claimId),
    releasedAt: typeof item.releasedAt === "number" ? item.releasedAt : undefined,
  };
}

/** Which transaction items failed, or rethrows anything that is not a lost condition. */
function cancelledIndexes(error: unknown): Set<number> | undefined {
  if (!(error instanceof TransactionCanceledException)) return undefined;
  const failed = new Set<number>();
  (error.CancellationReasons ?? []).forEach((reason, index) => {
    const code = reason.Code ?? "None";
    if (code === "None") return;
    if (code !== "ConditionalCheckFailed" && code !== "TransactionConflict") throw error;
    failed.add(index);
  });
  return failed;
}

/**
 * The allocator's private claims in one table (`CLAIMS_TABLE`): `svc#<service>` (its VIP and
 * the meshes using it), `addr#<vip>` (the owner) and `pool#<cidr>` (next-fit cursor, count).
 * Multi-item changes are transactions on this table only (it has no stream), so an address and
 * its service claim always change together.
 */
export class DynamoClaimStore implements ClaimStore {
  constructor(
    private readonly doc: DocumentClient,
    private readonly table: string,
    private readonly newId: () => string,
  ) {}

  async getServices(services: readonly string[]): Promise<Map<string, ServiceClaim>> {
    const items = await this.batchGet([...new Set(services)].map(serviceKey));
    const out = new Map<string, ServiceClaim>();
    for (const item of items) {
      const claim = decodeService(item);
      out.set(claim.service, claim);
    }
    return out;
  }

  async getAddresses(vips: readonly string[]): Promise<Map<string, AddressClaim>> {
    const items = await this.batchGet([...new Set(vips)].map(addressKey));
    const out = new Map<string, AddressClaim>();
    for (const item of items) {
      const claim = decodeAddress(item);
      out.set(claim.vip, claim);
    }
    return out;
  }

  async join(
    service: string,
    vip: string,
    mesh: string,
    membership: Membership,
    wasReleased: boolean,
  ): Promise<boolean> {
    const names = membershipNames(mesh);
    const values = {
      ":vip": vip,
      ":mem": membershipValue(membership),
      ":inc": membership.incarnation,
      ":ver": membership.version,
    };
    try {
      if (!wasReleased) {
        await this.doc.update({
          TableName: this.table,
          Key: { pk: serviceKey(service) },
          UpdateExpression: "SET #meshes.#m = :mem",
          ConditionExpression: `vip = :vip AND attribute_not_exists(releasedAt) AND ${NOT_LOWER}`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        });
      } else {
        await this.doc.transactWrite([
          {
            Update: {
              TableName: this.table,
              Key: { pk: serviceKey(service) },
              UpdateExpression: "SET #meshes.#m = :mem REMOVE releasedAt",
              ConditionExpression: `vip = :vip AND attribute_exists(releasedAt) AND ${NOT_LOWER}`,
              ExpressionAttributeNames: names,
              ExpressionAttributeValues: values,
            },
          },
          {
            Update: {
              TableName: this.table,
              Key: { pk: addressKey(vip) },
              UpdateExpression: "REMOVE releasedAt",
              ConditionExpression: "#owner = :svc",
              ExpressionAttributeNames: { "#owner": "owner" },
              ExpressionAttributeValues: { ":svc": service },
            },
          },
        ]);
      }
      return true;
    } catch (error) {
      if (!(error instanceof ConditionFailed) && !cancelledIndexes(error)) {
        throw error;
      }
      // Lost a condition: fine if the claim already carries this mesh at a version at least
      // as new (another writer of the same mesh asserted it), else the caller re-reads.
      const claim = (await this.getServices([service])).get(service);
      const held = claim?.meshes.get(mesh);
      return (
        claim !== undefined &&
        claim.vip === vip &&
        claim.releasedAt === undefined &&
        held !== undefined &&
        held.incarnation === membership.incarnation &&
        held.version >= membership.version
      );
    }
  }

  async claimNew(
    service: string,
    candidate: AddressCandidate,
    mesh: string,
    membership: Membership,
    nowMs: number,
    reclaimCutoffMs: number,
  ): Promise<ClaimOutcome> {
    const items = this.addressItems(service, candidate, nowMs, reclaimCutoffMs);
    const serviceIndex = items.length;
    items.push({
      Put: {
        TableName: this.table,
        Item: {
          pk: serviceKey(service),
          kind: "service",
          service,
          vip: candidate.vip,
          meshes: recordOf([[mesh, membershipValue(membership)]]),
          claimedAt: nowMs,
        },
        ConditionExpression: "attribute_not_exists(pk)",
      },
    });
    return await this.transact(items, serviceIndex);
  }

  async moveClaim(
    service: string,
    oldVip: string,
    candidate: AddressCandidate,
    mesh: string,
    membership: Membership,
    nowMs: number,
    reclaimCutoffMs: number,
  ): Promise<ClaimOutcome> {
    const items = this.addressItems(service, candidate, nowMs, reclaimCutoffMs);
    const serviceIndex = items.length;
    items.push({
      Update: {
        TableName: this.table,
        Key: { pk: serviceKey(service) },
        UpdateExpression: "SET vip = :new, #meshes.#m = :mem REMOVE releasedAt",
        ConditionExpression: `vip = :old AND ${NOT_LOWER}`,
        ExpressionAttributeNames: membershipNames(mesh),
        ExpressionAttributeValues: {
          ":new": candidate.vip,
          ":old": oldVip,
          ":mem": membershipValue(membership),
          ":inc": membership.incarnation,
          ":ver": membership.version,
        },
      },
    });
    // Every move is counted, so each mesh item that still lists the old VIP is checked against
    // the claims when next reconciled (the count it was checked at is on the item).
    items.push({
      Update: {
        TableName: this.table,
        Key: { pk: RENUMBERINGS_KEY },
        UpdateExpression: "SET kind = :kind ADD moves :one",
        ExpressionAttributeValues: { ":kind": "renumberings", ":one": 1 },
      },
    });
    // The old address claim is kept, owned by the service: meshes not yet reconciled under the
    // new range still list it, and a rolled-back range would bring it back in range; it must
    // never go to another service. (It is not reclaimed: a known, bounded leak per CIDR change.)
    return await this.transact(items, serviceIndex);
  }

  async leave(
    service: string,
    mesh: string,
    incarnation: string,
    upToVersion: number,
    nowMs: number,
  ): Promise<"released" | "left" | "kept"> {
    let removed = true;
    let found: Record<string, unknown> | undefined;
    try {
      found = await this.doc.update({
        TableName: this.table,
        Key: { pk: serviceKey(service) },
        UpdateExpression: "REMOVE #meshes.#m",
        ConditionExpression: "#meshes.#m.#i = :inc AND #meshes.#m.#v <= :ver",
        ExpressionAttributeNames: membershipNames(mesh),
        ExpressionAttributeValues: { ":inc": incarnation, ":ver": upToVersion },
        ReturnValues: "ALL_NEW",
      });
    } catch (error) {
      if (!(error instanceof ConditionFailed)) throw error;
      // Not ours to remove, or already removed (perhaps by this very request, whose response
      // was lost and retried): look at what is there now.
      removed = false;
      found = await this.doc.get({
        TableName: this.table,
        Key: { pk: serviceKey(service) },
        ConsistentRead: true,
      });
    }
    if (found === undefined) return "kept";
    const claim = decodeService(found);
    if (claim.meshes.size > 0 || claim.releasedAt !== undefined) return removed ? "left" : "kept";
    // No mesh uses the service any more and it is not released yet: release it.
    try {
      await this.doc.transactWrite([
        {
          Update: {
            TableName: this.table,
            Key: { pk: serviceKey(service) },
            UpdateExpression: "SET releasedAt = :now",
            ConditionExpression:
              "size(#meshes) = :zero AND attribute_not_exists(releasedAt) AND vip = :vip",
            ExpressionAttributeNames: { "#meshes": "meshes" },
            ExpressionAttributeValues: { ":now": nowMs, ":zero": 0, ":vip": claim.vip },
          },
        },
        {
          Update: {
            TableName: this.table,
            Key: { pk: addressKey(claim.vip) },
            UpdateExpression: "SET releasedAt = :now",
            ConditionExpression: "#owner = :svc",
            ExpressionAttributeNames: { "#owner": "owner" },
            ExpressionAttributeValues: { ":now": nowMs, ":svc": service },
          },
        },
      ]);
      return "released";
    } catch (error) {
      if (cancelledIndexes(error)) return removed ? "left" : "kept";
      throw error;
    }
  }

  async readCursor(cidr: string): Promise<bigint> {
    const item = await this.doc.get({
      TableName: this.table,
      Key: { pk: poolKey(cidr) },
      ConsistentRead: true,
    });
    const next = item?.next;
    return typeof next === "string" && /^\d+$/.test(next) ? BigInt(next) : 0n;
  }

  async getRenumberings(): Promise<number> {
    const item = await this.doc.get({
      TableName: this.table,
      Key: { pk: RENUMBERINGS_KEY },
      ConsistentRead: true,
    });
    return typeof item?.moves === "number" ? item.moves : 0;
  }

  async advanceCursor(cidr: string, next: bigint, newlyClaimed: number): Promise<number> {
    const result = await this.doc.update({
      TableName: this.table,
      Key: { pk: poolKey(cidr) },
      UpdateExpression: "SET #next = :next, kind = :kind ADD claimed :n",
      ExpressionAttributeNames: { "#next": "next" },
      ExpressionAttributeValues: {
        ":next": next.toString(),
        ":n": newlyClaimed,
        ":kind": "pool",
      },
      ReturnValues: "ALL_NEW",
    });
    return Number(result?.claimed ?? 0);
  }

  /** Transaction items that take `candidate` for `service` (reclaiming it if released). */
  private addressItems(
    service: string,
    candidate: AddressCandidate,
    nowMs: number,
    reclaimCutoffMs: number,
  ): TransactItem[] {
    const item = {
      pk: addressKey(candidate.vip),
      kind: "address",
      vip: candidate.vip,
      owner: service,
      claimId: this.newId(),
      claimedAt: nowMs,
    };
    const previous = candidate.reclaimFrom;
    if (previous === undefined) {
      return [
        {
          Put: {
            TableName: this.table,
            Item: item,
            ConditionExpression: "attribute_not_exists(pk)",
          },
        },
      ];
    }
    return [
      {
        Delete: {
          TableName: this.table,
          Key: { pk: serviceKey(previous.owner) },
          ConditionExpression: "vip = :vip AND size(#meshes) = :zero AND releasedAt <= :cutoff",
          ExpressionAttributeNames: { "#meshes": "meshes" },
          ExpressionAttributeValues: {
            ":vip": candidate.vip,
            ":zero": 0,
            ":cutoff": reclaimCutoffMs,
          },
        },
      },
      {
        Put: {
          TableName: this.table,
          Item: item,
          ConditionExpression: "claimId = :previous",
          ExpressionAttributeValues: { ":previous": previous.claimId },
        },
      },
    ];
  }

  private async transact(items: TransactItem[], serviceIndex: number): Promise<ClaimOutcome> {
    try {
      await this.doc.transactWrite(items);
      return "ok";
    } catch (error) {
      const failed = cancelledIndexes(error);
      if (failed === undefined) throw error;
      return failed.has(serviceIndex) ? "service-changed" : "address-taken";
    }
  }

  private async batchGet(keys: string[]): Promise<Record<string, unknown>[]> {
    return await this.doc.batchGet(
      this.table,
      keys.map((pk) => ({ pk })),
    );
  }
}
