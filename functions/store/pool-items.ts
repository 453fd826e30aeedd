import { type ClaimWrite, copy, type Item, poolKey } from "./claim-items.ts";

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
