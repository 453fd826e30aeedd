import { recordOf } from "../domain/records.ts";
import {
  addressKey,
  type ClaimWrite,
  copy,
  has,
  type Item,
  mapOf,
  membershipIn,
  membershipNames,
  membershipValue,
  NOT_LOWER,
  ownedBy,
  RENUMBERINGS_KEY,
  serviceKey,
  setMembership,
} from "./claim-items.ts";
import type { ClaimRequest, LeaveRequest, MembershipRequest, ReleaseRequest } from "./ports.ts";

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

/** Memberships of a service in meshes, the release of a service no mesh uses, and the sweep's removal of an orphaned address. */

/**
 * Records that `mesh` uses the service at `vip` (the claim must still hold `vip`). With
 * `resume` (the claim was released) it also ends the quarantine, on both claims, in one
 * transaction.
 */
export function membershipWrites(req: MembershipRequest): ClaimWrite[] {
  const { service, vip, mesh, membership } = req;
  const key = serviceKey(service);
  const values = {
    ":vip": vip,
    ":mem": membershipValue(membership),
    ":inc": membership.incarnation,
    ":ver": membership.version,
  };
  const released = req.resume ? "attribute_exists(releasedAt)" : "attribute_not_exists(releasedAt)";
  const serviceWrite: ClaimWrite = {
    key,
    action: "update",
    updateExpression: req.resume
      ? "SET #meshes.#m = :mem REMOVE releasedAt"
      : "SET #meshes.#m = :mem",
    conditionExpression: `vip = :vip AND ${released} AND ${NOT_LOWER.expression}`,
    names: membershipNames(mesh),
    values,
    holds: (item) =>
      item?.vip === vip &&
      has(item, "releasedAt") === req.resume &&
      NOT_LOWER.holds(item, mesh, membership),
    apply: (item) => {
      const next = copy(item, key);
      setMembership(next, mesh, membership);
      delete next.releasedAt;
      return next;
    },
  };
  if (!req.resume) return [serviceWrite];
  return [serviceWrite, ownedBy(service, vip, "REMOVE releasedAt", undefined)];
}

/** Removes `mesh`'s membership if it was asserted by `incarnation` at a version up to `upToVersion`. */
export function removeMembershipWrite(req: LeaveRequest): ClaimWrite {
  const key = serviceKey(req.service);
  return {
    key,
    action: "update",
    updateExpression: "REMOVE #meshes.#m",
    conditionExpression: "#meshes.#m.#i = :inc AND #meshes.#m.#v <= :ver",
    names: membershipNames(req.mesh),
    values: { ":inc": req.incarnation, ":ver": req.upToVersion },
    holds: (item) => {
      const held = membershipIn(item, req.mesh);
      return (
        held !== undefined && held.i === req.incarnation && (held.v as number) <= req.upToVersion
      );
    },
    apply: (item) => {
      const next = copy(item, key);
      const meshes = mapOf(next, "meshes");
      if (meshes !== undefined) delete meshes[req.mesh];
      return next;
    },
  };
}

/**
 * Starts the quarantine of a former address (marked `former` when the service moved away from
 * it) of a service that no mesh uses any more: the release hint makes the finder offer it for
 * reclaim once the quarantine is over (a reclaim that only checks the owner no longer holds
 * it). Written before the release itself: the service is in no mesh, so no item lists it at
 * any address.
 */
export function formerHintWrite(service: string, vip: string, nowMs: number): ClaimWrite {
  const key = addressKey(vip);
  return {
    key,
    action: "update",
    updateExpression: "SET releasedAt = :now",
    // Still former: a concurrent pass that moved the service back to it wrote a fresh claim.
    conditionExpression: "#owner = :svc AND former = :true",
    names: { "#owner": "owner" },
    values: { ":svc": service, ":now": nowMs, ":true": true },
    holds: (item) => item?.owner === service && item?.former === true,
    apply: (item) => ({ ...copy(item, key), releasedAt: nowMs }),
  };
}

/**
 * Starts the quarantine of a service no mesh uses any more, on both claims; its former
 * addresses were hinted first ({@link formerHintWrite}), so the claim forgets them.
 */
export function releaseWrites(req: ReleaseRequest): ClaimWrite[] {
  const key = serviceKey(req.service);
  return [
    {
      key,
      action: "update",
      updateExpression: "SET releasedAt = :now REMOVE former",
      conditionExpression:
        "size(#meshes) = :zero AND attribute_not_exists(releasedAt) AND vip = :vip",
      names: { "#meshes": "meshes" },
      values: { ":now": req.nowMs, ":zero": 0, ":vip": req.vip },
      holds: (item) => {
        const meshes = mapOf(item, "meshes");
        return (
          meshes !== undefined &&
          Object.keys(meshes).length === 0 &&
          !has(item, "releasedAt") &&
          item?.vip === req.vip
        );
      },
      apply: (item) => {
        const next: Item = { ...copy(item, key), releasedAt: req.nowMs };
        delete next.former;
        return next;
      },
    },
    ownedBy(req.service, req.vip, "SET releasedAt = :now", req.nowMs),
  ];
}

/**
 * Deletes an address claim whose owner has no service claim any more (nothing can reclaim it:
 * a reclaim checks the owner's claim), if it is still the exact claim seen (the sweep's fix).
 */
export function orphanAddressWrite(vip: string, owner: string, claimId: string): ClaimWrite {
  return {
    key: addressKey(vip),
    action: "delete",
    conditionExpression: "#owner = :owner AND claimId = :claim",
    names: { "#owner": "owner" },
    values: { ":owner": owner, ":claim": claimId },
    holds: (item) => item?.owner === owner && item?.claimId === claimId,
    apply: () => undefined,
  };
}

/**
 * `vips adopt`'s claim: the service's claim at the VIP another allocator gave it, and the
 * address's claim, in one transaction, each create-if-absent like a new claim on the event path
 * (claim-writes.ts): if a pass has meanwhile claimed the service or the address, nothing is
 * written and the adoption reports it. The items are the event path's, except that the service
 * claim has no mesh membership yet (`meshes` empty): the mesh's pass joins it as it joins any
 * claim (the same VIP in every mesh), and a claim no mesh joins is released like any other.
 * `adoptedAt` records when (the claim is otherwise an ordinary claim).
 */
export function adoptWrites(
  service: string,
  vip: string,
  claimId: string,
  nowMs: number,
): { writes: ClaimWrite[]; serviceIndex: number } {
  const address: Item = {
    pk: addressKey(vip),
    kind: "address",
    vip,
    owner: service,
    claimId,
    claimedAt: nowMs,
  };
  const claim: Item = {
    pk: serviceKey(service),
    kind: "service",
    service,
    vip,
    meshes: Object.create(null) as Record<string, unknown>,
    claimedAt: nowMs,
    adoptedAt: nowMs,
  };
  const put = (item: Item): ClaimWrite => ({
    key: String(item.pk),
    action: "put",
    item,
    conditionExpression: "attribute_not_exists(pk)",
    holds: (old) => old === undefined,
    apply: () => item,
  });
  return { writes: [put(address), put(claim)], serviceIndex: 1 };
}
