import { addressKey, type ClaimWrite, type Item, serviceKey } from "./claim-items.ts";

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
