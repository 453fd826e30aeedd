import type { VipItem } from "../../domain/types.ts";
import type { VipItemStore } from "../../store/ports.ts";

/**
 * The fence of decision 041, the one way the allocator moves an item without changing its
 * content: the item is rewritten at version `past`, conditional on the revision it has now,
 * so a pass about to write a version up to `past` loses its condition, re-reads and asserts
 * again what it lists; a membership asserted for such a version may then be left. Undefined
 * when the item moved on meanwhile (the caller decides on the new one).
 */
export async function fenceItem(
  vipItems: VipItemStore,
  item: VipItem,
  past: number,
  nowMs: number,
): Promise<VipItem | undefined> {
  const fenced: VipItem = { ...item, version: past, updatedAt: new Date(nowMs).toISOString() };
  const write = await vipItems.put(fenced, item);
  return write.written ? fenced : undefined;
}
