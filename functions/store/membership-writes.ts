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
  serviceKey,
  setMembership,
} from "./claim-items.ts";
import type { LeaveRequest, MembershipRequest, ReleaseRequest } from "./ports.ts";

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
