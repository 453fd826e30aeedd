import type { Membership } from "../domain/types.ts";
import type { AddressClaim, ServiceClaim } from "./ports.ts";

/**
 * The claims table's items (keys, decoders) and the fragments every conditional write on them
 * is built from. The writes are defined once: claim-writes.ts (taking an address, memberships,
 * release, orphaned addresses, adoption) and state-items.ts (the pool's cursor and counter, the
 * sweep's position, the range records, the waiting list). Each write carries its DynamoDB form
 * (expressions, as the adapter sends them) and the same condition and
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
/** The latest time the event path saw its stream lag past the sweep's grace (decision 132). */
export const STREAM_LAG_KEY = "stream-lag";

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

export function mapOf(
  item: Item | undefined,
  attribute: string,
): Record<string, unknown> | undefined {
  const value = item?.[attribute];
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

export function membershipIn(item: Item | undefined, mesh: string) {
  const meshes = mapOf(item, "meshes");
  if (meshes === undefined || !Object.hasOwn(meshes, mesh)) return undefined;
  return meshes[mesh] as { i?: unknown; v?: unknown };
}

export const has = (item: Item | undefined, attribute: string): boolean =>
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

export function membershipValue(membership: Membership): { i: string; v: number } {
  return { i: membership.incarnation, v: membership.version };
}

/** Names of the membership expressions (`#meshes.#m.#i`, `#meshes.#m.#v`). */
export function membershipNames(mesh: string): Record<string, string> {
  return { "#meshes": "meshes", "#m": mesh, "#i": "i", "#v": "v" };
}

// --- condition fragments: expression and meaning together -----------------------------------

/** Never lowers the version of an existing membership of the same incarnation. */
export const NOT_LOWER = {
  expression:
    "(attribute_not_exists(#meshes.#m) OR #meshes.#m.#i <> :inc OR #meshes.#m.#v <= :ver)",
  holds(item: Item | undefined, mesh: string, membership: Membership): boolean {
    const held = membershipIn(item, mesh);
    if (held === undefined) return true;
    return held.i !== membership.incarnation || (held.v as number) <= membership.version;
  },
};

/** `SET #meshes.#m = :mem` (DynamoDB rejects the path when `meshes` is not a map). */
export function setMembership(item: Item, mesh: string, membership: Membership): void {
  const meshes = mapOf(item, "meshes");
  if (meshes === undefined)
    throw new Error("The document path provided in the update expression is invalid");
  meshes[mesh] = membershipValue(membership);
}

export function copy(item: Item | undefined, key: string): Item {
  return item ?? { pk: key };
}

/** An update of `addr#<vip>` conditional on its owner: clears or sets `releasedAt`. */
export function ownedBy(
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
