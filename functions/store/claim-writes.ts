import { recordOf } from "../domain/records.ts";
import {
  addressKey,
  type ClaimWrite,
  copy,
  type Item,
  mapOf,
  membershipNames,
  membershipValue,
  NOT_LOWER,
  RENUMBERINGS_KEY,
  serviceKey,
  setMembership,
} from "./claim-items.ts";
import type { ClaimRequest } from "./ports.ts";

/**
 * Takes `candidate` for a service: a new claim (the service has none), or a move of its claim
 * from `moveFrom` (a renumbering, counted). A released address is reclaimed only past the
 * cutoff and only from the exact claim the finder saw. Returns the writes and which of them
 * is the service's (so a failure can say which side lost).
 */
export function claimWrites(
  req: ClaimRequest,
  claimId: string,
): { writes: ClaimWrite[]; serviceIndex: number } {
  const { service, candidate, mesh, membership, nowMs } = req;
  const writes = addressWrites(service, candidate, claimId, nowMs, req.reclaimCutoffMs);
  // Marks the address the service moves away from as former: if it carries a release hint
  // (the claim was released), it is reclaimable by its own path, not left to a reclaim that
  // expects the owner to still hold it.
  const formerMark = (vip: string): ClaimWrite => {
    const key = addressKey(vip);
    return {
      key,
      action: "update",
      updateExpression: "SET former = :true",
      conditionExpression: "#owner = :svc",
      names: { "#owner": "owner" },
      values: { ":svc": service, ":true": true },
      holds: (item) => item?.owner === service,
      apply: (item) => ({ ...copy(item, key), former: true }),
    };
  };
  const key = serviceKey(service);
  const serviceIndex = writes.length;
  if (req.moveFrom === undefined) {
    const item: Item = {
      pk: key,
      kind: "service",
      service,
      vip: candidate.vip,
      meshes: recordOf([[mesh, membershipValue(membership)]]),
      claimedAt: nowMs,
    };
    writes.push({
      key,
      action: "put",
      item,
      conditionExpression: "attribute_not_exists(pk)",
      holds: (old) => old === undefined,
      apply: () => item,
    });
    return { writes, serviceIndex };
  }
  const oldVip = req.moveFrom;
  writes.push({
    key,
    action: "update",
    // The old address goes to `former`: still owned, and hinted for reclaim when the service
    // is released (no mesh lists it then), so it is never stranded (see releaseWrites).
    updateExpression: "SET vip = :new, #meshes.#m = :mem REMOVE releasedAt ADD former :olds",
    conditionExpression: `vip = :old AND ${NOT_LOWER.expression}`,
    names: membershipNames(mesh),
    values: {
      ":new": candidate.vip,
      ":old": oldVip,
      ":olds": new Set([oldVip]),
      ":mem": membershipValue(membership),
      ":inc": membership.incarnation,
      ":ver": membership.version,
    },
    holds: (item) => item?.vip === oldVip && NOT_LOWER.holds(item, mesh, membership),
    apply: (item) => {
      const next = copy(item, key);
      next.vip = candidate.vip;
      setMembership(next, mesh, membership);
      delete next.releasedAt;
      const former = new Set(next.former instanceof Set ? next.former : []);
      former.add(oldVip);
      next.former = former;
      return next;
    },
  });
  // Every move is counted, so each mesh item that still lists the old VIP is checked against
  // the claims when next reconciled. The old address claim is kept, owned by the service:
  // meshes not yet reconciled still list it, and a rolled-back range brings it back.
  writes.push({
    key: RENUMBERINGS_KEY,
    action: "update",
    updateExpression: "SET kind = :kind ADD moves :one",
    values: { ":kind": "renumberings", ":one": 1 },
    holds: () => true,
    apply: (item) => ({
      ...copy(item, RENUMBERINGS_KEY),
      kind: "renumberings",
      moves: (typeof item?.moves === "number" ? item.moves : 0) + 1,
    }),
  });
  writes.push(formerMark(oldVip));
  return { writes, serviceIndex };
}

function addressWrites(
  service: string,
  candidate: ClaimRequest["candidate"],
  claimId: string,
  nowMs: number,
  reclaimCutoffMs: number,
): ClaimWrite[] {
  const key = addressKey(candidate.vip);
  const item: Item = {
    pk: key,
    kind: "address",
    vip: candidate.vip,
    owner: service,
    claimId,
    claimedAt: nowMs,
  };
  const previous = candidate.reclaimFrom;
  if (previous === undefined) {
    return [
      {
        key,
        action: "put",
        item,
        conditionExpression: "attribute_not_exists(pk)",
        holds: (old) => old === undefined,
        apply: () => item,
      },
    ];
  }
  // The address taken over, only from the exact claim the finder saw.
  const take: ClaimWrite = {
    key,
    action: "put",
    item,
    conditionExpression: "claimId = :previous",
    values: { ":previous": previous.claimId },
    holds: (old) => old !== undefined && old.claimId === previous.claimId,
    apply: () => item,
  };
  if (previous.former === true) {
    // Its own former address: the service's own write (a move, conditional on the VIP it
    // holds) is the check.
    if (previous.owner === service) return [take];
    // A former address of another service: the owner's claim stays; the reclaim only checks
    // that the owner no longer holds this address (or has no claim at all any more).
    return [
      {
        key: serviceKey(previous.owner),
        action: "check",
        conditionExpression: "attribute_not_exists(pk) OR vip <> :vip",
        values: { ":vip": candidate.vip },
        holds: (old) => old === undefined || old.vip !== candidate.vip,
        apply: (old) => old,
      },
      take,
    ];
  }
  return [
    {
      // The released owner's claim goes with its address. A claim still owning former
      // addresses may go too: they were hinted for reclaim when it was released. An owner with
      // no claim left (its address orphaned) holds nothing this reclaim could take away.
      key: serviceKey(previous.owner),
      action: "delete",
      conditionExpression:
        "attribute_not_exists(pk) OR (vip = :vip AND size(#meshes) = :zero AND releasedAt <= :cutoff)",
      names: { "#meshes": "meshes" },
      values: { ":vip": candidate.vip, ":zero": 0, ":cutoff": reclaimCutoffMs },
      holds: (old) =>
        old === undefined ||
        (old.vip === candidate.vip &&
          mapOf(old, "meshes") !== undefined &&
          Object.keys(mapOf(old, "meshes") ?? {}).length === 0 &&
          typeof old.releasedAt === "number" &&
          old.releasedAt <= reclaimCutoffMs),
      apply: () => undefined,
    },
    take,
  ];
}
