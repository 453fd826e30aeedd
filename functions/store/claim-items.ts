import { recordOf } from "../domain/records.ts";
import type { Membership } from "../domain/types.ts";
import type {
  AddressClaim,
  ClaimRequest,
  LeaveRequest,
  MembershipRequest,
  ReleaseRequest,
  ServiceClaim,
  SweepState,
} from "./ports.ts";

/**
 * The claims table's items and every conditional write on them, defined once. Each write
 * carries its DynamoDB form (expressions, as the adapter sends them) and the same condition and
 * change as functions over an item (as the in-memory test double applies them), side by side,
 * so the double cannot drift from the adapter.
 *
 * Items: `svc#<service>` (its VIP, and `meshes.<mesh> = {i: incarnation, v: version}` for each
 * mesh that lists it; `releasedAt` once no mesh does; `former`, the addresses it held before
 * a renumbering, still owned by it), `addr#<vip>` (owner, a random claimId, a copy of the
 * owner's `releasedAt`, and `former` when the owner has moved on to another address), `pool#<cidr>` (next-fit cursor and claim count),
 * `renumberings` (how many claims ever moved to another VIP), `waiting` (meshes waiting for an
 * address), `sweep` (the repair sweep's position).
 */
export type Item = Record<string, unknown>;

export const serviceKey = (service: string): string => `svc#${service}`;
export const addressKey = (vip: string): string => `addr#${vip}`;
export const poolKey = (cidr: string): string => `pool#${cidr}`;
export const RENUMBERINGS_KEY = "renumberings";
/** The meshes whose item lists unallocated services (woken when addresses are freed). */
export const WAITING_KEY = "waiting";
/** Where the repair sweep is in its cycle. */
export const SWEEP_KEY = "sweep";

/** One conditional write of one claims item. */
export interface ClaimWrite {
  readonly key: string;
  /** `check`: a transaction's condition on an item it does not change. */
  readonly action: "put" | "update" | "delete" | "check";
  /** The item a put writes. */
  readonly item?: Item;
  readonly updateExpression?: string;
  readonly conditionExpression?: string;
  readonly names?: Record<string, string>;
  readonly values?: Record<string, unknown>;
  /** The condition over the item as it is (undefined: absent); true when there is none. */
  readonly holds: (item: Item | undefined) => boolean;
  /** The item after the write (undefined: deleted), given a copy of the item before. */
  readonly apply: (item: Item | undefined) => Item | undefined;
}

function mapOf(item: Item | undefined, attribute: string): Record<string, unknown> | undefined {
  const value = item?.[attribute];
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

function membershipIn(item: Item | undefined, mesh: string) {
  const meshes = mapOf(item, "meshes");
  if (meshes === undefined || !Object.hasOwn(meshes, mesh)) return undefined;
  return meshes[mesh] as { i?: unknown; v?: unknown };
}

const has = (item: Item | undefined, attribute: string): boolean =>
  item !== undefined && Object.hasOwn(item, attribute) && item[attribute] !== undefined;

export function decodeService(item: Item): ServiceClaim {
  const meshes = new Map<string, Membership>();
  const raw = mapOf(item, "meshes") ?? {};
  for (const mesh of Object.keys(raw)) {
    const m = raw[mesh] as { i?: unknown; v?: unknown };
    meshes.set(mesh, { incarnation: String(m.i), version: Number(m.v) });
  }
  // Its current VIP never counts as former (a service may move back to a former address).
  const former =
    item.former instanceof Set
      ? [...item.former]
          .map(String)
          .filter((vip) => vip !== String(item.vip))
          .sort()
      : [];
  return {
    service: String(item.service),
    vip: String(item.vip),
    meshes,
    releasedAt: typeof item.releasedAt === "number" ? item.releasedAt : undefined,
    ...(former.length > 0 ? { former } : {}),
  };
}

export function decodeAddress(item: Item): AddressClaim {
  return {
    vip: String(item.vip),
    owner: String(item.owner),
    claimId: String(item.claimId),
    releasedAt: typeof item.releasedAt === "number" ? item.releasedAt : undefined,
    ...(item.former === true ? { former: true } : {}),
  };
}

function membershipValue(membership: Membership): { i: string; v: number } {
  return { i: membership.incarnation, v: membership.version };
}

/** Names of the membership expressions (`#meshes.#m.#i`, `#meshes.#m.#v`). */
function membershipNames(mesh: string): Record<string, string> {
  return { "#meshes": "meshes", "#m": mesh, "#i": "i", "#v": "v" };
}

// --- condition fragments: expression and meaning together -----------------------------------

/** Never lowers the version of an existing membership of the same incarnation. */
const NOT_LOWER = {
  expression:
    "(attribute_not_exists(#meshes.#m) OR #meshes.#m.#i <> :inc OR #meshes.#m.#v <= :ver)",
  holds(item: Item | undefined, mesh: string, membership: Membership): boolean {
    const held = membershipIn(item, mesh);
    if (held === undefined) return true;
    return held.i !== membership.incarnation || (held.v as number) <= membership.version;
  },
};

/** `SET #meshes.#m = :mem` (DynamoDB rejects the path when `meshes` is not a map). */
function setMembership(item: Item, mesh: string, membership: Membership): void {
  const meshes = mapOf(item, "meshes");
  if (meshes === undefined)
    throw new Error("The document path provided in the update expression is invalid");
  meshes[mesh] = membershipValue(membership);
}

function copy(item: Item | undefined, key: string): Item {
  return item ?? { pk: key };
}

// --- the writes -------------------------------------------------------------------------------

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

/** An update of `addr#<vip>` conditional on its owner: clears or sets `releasedAt`. */
function ownedBy(
  service: string,
  vip: string,
  updateExpression: string,
  releasedAt: number | undefined,
): ClaimWrite {
  const key = addressKey(vip);
  return {
    key,
    action: "update",
    updateExpression,
    conditionExpression: "#owner = :svc",
    names: { "#owner": "owner" },
    values: { ":svc": service, ...(releasedAt !== undefined ? { ":now": releasedAt } : {}) },
    holds: (item) => item?.owner === service,
    apply: (item) => {
      const next = copy(item, key);
      if (releasedAt === undefined) delete next.releasedAt;
      else next.releasedAt = releasedAt;
      return next;
    },
  };
}

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
  if (previous?.former === true) {
    const take: ClaimWrite = {
      key,
      action: "put",
      item,
      conditionExpression: "claimId = :previous",
      values: { ":previous": previous.claimId },
      holds: (old) => old !== undefined && old.claimId === previous.claimId,
      apply: () => item,
    };
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
      {
        key,
        action: "put",
        item,
        conditionExpression: "claimId = :previous",
        values: { ":previous": previous.claimId },
        holds: (old) => old !== undefined && old.claimId === previous.claimId,
        apply: () => item,
      },
    ];
  }
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
    {
      key,
      action: "put",
      item,
      conditionExpression: "claimId = :previous",
      values: { ":previous": previous.claimId },
      holds: (old) => old !== undefined && old.claimId === previous.claimId,
      apply: () => item,
    },
  ];
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

/** Adds `mesh` to, or removes it from, the meshes waiting for an address. */
export function waitingWrite(mesh: string, waiting: boolean): ClaimWrite {
  return {
    key: WAITING_KEY,
    action: "update",
    updateExpression: waiting ? "SET kind = :kind ADD meshes :m" : "DELETE meshes :m",
    values: waiting ? { ":kind": "waiting", ":m": new Set([mesh]) } : { ":m": new Set([mesh]) },
    holds: () => true,
    apply: (item) => {
      const meshes = new Set(waitingMeshes(item));
      if (waiting) meshes.add(mesh);
      else meshes.delete(mesh);
      const next: Item = { ...copy(item, WAITING_KEY), kind: "waiting" };
      if (meshes.size > 0) next.meshes = meshes;
      else delete next.meshes;
      return next;
    },
  };
}

/** The meshes a `waiting` item lists (a string set; absent when empty). */
export function waitingMeshes(item: Item | undefined): string[] {
  const meshes = item?.meshes;
  return meshes instanceof Set ? [...meshes].filter((m): m is string => typeof m === "string") : [];
}

/** Moves a range's next-fit cursor and adds to its claim count (unconditional). */
export function cursorWrite(cidr: string, next: bigint, newlyClaimed: number): ClaimWrite {
  const key = poolKey(cidr);
  return {
    key,
    action: "update",
    updateExpression: "SET #next = :next, kind = :kind ADD claimed :n",
    names: { "#next": "next" },
    values: { ":next": next.toString(), ":n": newlyClaimed, ":kind": "pool" },
    holds: () => true,
    apply: (item) => ({
      ...copy(item, key),
      next: next.toString(),
      kind: "pool",
      claimed: (typeof item?.claimed === "number" ? item.claimed : 0) + newlyClaimed,
    }),
  };
}

/** A range's claim counter as stored (0 when the pool item or its count is absent). */
export function counterOf(item: Item | undefined): number {
  return typeof item?.claimed === "number" ? item.claimed : 0;
}

/** Sets a range's claim counter, if it still holds `expected` (the repair sweep's fix). */
export function counterWrite(cidr: string, expected: number, claimed: number): ClaimWrite {
  const key = poolKey(cidr);
  return {
    key,
    action: "update",
    updateExpression: "SET claimed = :c, kind = :kind",
    conditionExpression:
      expected === 0 ? "attribute_not_exists(claimed) OR claimed = :e" : "claimed = :e",
    values: { ":c": claimed, ":e": expected, ":kind": "pool" },
    holds: (item) => counterOf(item) === expected,
    apply: (item) => ({ ...copy(item, key), kind: "pool", claimed }),
  };
}

const SWEEP_PHASES = new Set(["index", "meshes", "items", "claims", "done"]);

/** The sweep's state item, or undefined when it is absent or not one. */
export function decodeSweepState(item: Item | undefined): SweepState | undefined {
  if (item === undefined || !SWEEP_PHASES.has(String(item.phase))) return undefined;
  const num = (value: unknown): number => (typeof value === "number" ? value : 0);
  return {
    cycle: String(item.cycle),
    startedAt: num(item.startedAt),
    phase: item.phase as SweepState["phase"],
    after: typeof item.after === "string" ? item.after : undefined,
    meshes: num(item.meshes),
    repairs: num(item.repairs),
    addressesInRange: num(item.addressesInRange),
    counterAtStart: typeof item.counterAtStart === "number" ? item.counterAtStart : undefined,
    ...(typeof item.finishedAt === "number" ? { finishedAt: item.finishedAt } : {}),
    ...(typeof item.counterDelta === "number" ? { counterDelta: item.counterDelta } : {}),
    ...(item.backfill === true ? { backfill: true } : {}),
    ...(typeof item.previousDelta === "number" ? { previousDelta: item.previousDelta } : {}),
    version: num(item.version),
  };
}

/** Writes the sweep's state if the stored one still has `expectedVersion` (undefined: none). */
export function sweepStateWrite(
  state: SweepState,
  expectedVersion: number | undefined,
): ClaimWrite {
  const item: Item = { pk: SWEEP_KEY, kind: "sweep" };
  for (const [name, value] of Object.entries(state)) {
    if (value !== undefined) item[name] = value;
  }
  const stored = (current: Item | undefined) =>
    current === undefined ? undefined : (current.version as number | undefined);
  return {
    key: SWEEP_KEY,
    action: "put",
    item,
    ...(expectedVersion === undefined
      ? { conditionExpression: "attribute_not_exists(pk)" }
      : {
          conditionExpression: "#v = :expected",
          names: { "#v": "version" },
          values: { ":expected": expectedVersion },
        }),
    holds: (current) =>
      expectedVersion === undefined ? current === undefined : stored(current) === expectedVersion,
    apply: () => item,
  };
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
