import { gunzipSync, gzipSync } from "node:zlib";
import { VipItemTooLargeError } from "../domain/errors.ts";
import { emptyRecord } from "../domain/records.ts";
import type { VipItem } from "../domain/types.ts";
import { itemSizeBytes } from "./attribute-values.ts";

/**
 * Largest stored size of a VIP item in the plain format (`vips` as a map). Above it the item is
 * written in the compact format 2. 64 KB keeps a write at 64 WCU or less and covers meshes of
 * about 1,500 services in the plain format that any DynamoDB reader understands.
 */
export const PLAIN_FORMAT_MAX_BYTES = 64 * 1024;

/** DynamoDB's item size limit, minus headroom for our size estimate's error. */
export const ITEM_MAX_BYTES = 390 * 1024;

/**
 * The stored formats of a VIP item:
 * - plain (no `format` attribute): `vips` and `unallocated` are maps of strings;
 * - `format: 2`: `vipsGz` (B) is gzip of the JSON `{"vips": {...}, "unallocated": {...}}`,
 *   and `serviceCount` (N) says how many services `vips` has; `vips` is absent.
 * Every other attribute is the same in both. Plain stays the format of ordinary meshes.
 */
export type StoredVipItem = Record<string, unknown>;

/** Encodes an item, choosing the compact format only when the plain one is too large. */
export function encodeVipItem(item: VipItem): { stored: StoredVipItem; bytes: number } {
  const { vips, unallocated, leaving, ...rest } = item;
  const plain: StoredVipItem = {
    ...rest,
    vips,
    ...(unallocated ? { unallocated } : {}),
    ...(leaving && leaving.length > 0 ? { leaving } : {}),
  };
  const plainBytes = itemSizeBytes(plain);
  if (plainBytes <= PLAIN_FORMAT_MAX_BYTES) return { stored: plain, bytes: plainBytes };
  const payload = JSON.stringify({ vips, unallocated: unallocated ?? {}, leaving: leaving ?? [] });
  const compact: StoredVipItem = {
    ...rest,
    format: 2,
    serviceCount: Object.keys(vips).length,
    vipsGz: gzipSync(payload, { level: 9 }),
  };
  const bytes = itemSizeBytes(compact);
  if (bytes > ITEM_MAX_BYTES) throw new VipItemTooLargeError(item.mesh, bytes, ITEM_MAX_BYTES);
  return { stored: compact, bytes };
}

function stringRecord(value: unknown): Record<string, string> {
  if (typeof value !== "object" || value === null) return {};
  const out = emptyRecord<string>();
  for (const [key, inner] of Object.entries(value)) {
    if (typeof inner === "string") out[key] = inner;
  }
  return out;
}

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((entry) => typeof entry === "string") : [];
}

/** Reads a stored VIP item in either format (the project's reader for downstream code). */
export function decodeVipItem(raw: StoredVipItem): VipItem {
  let vips = stringRecord(raw.vips);
  let unallocated = stringRecord(raw.unallocated);
  let leaving = stringList(raw.leaving);
  if (Number(raw.format) === 2) {
    const bytes = raw.vipsGz;
    if (!(bytes instanceof Uint8Array)) {
      throw new Error(`VIP item of mesh ${String(raw.mesh)}: format 2 without vipsGz`);
    }
    const payload = JSON.parse(gunzipSync(bytes).toString("utf8")) as Record<string, unknown>;
    vips = stringRecord(payload.vips);
    unallocated = stringRecord(payload.unallocated);
    leaving = stringList(payload.leaving);
  }
  return {
    mesh: String(raw.mesh),
    version: Number(raw.version),
    vips,
    cidr: String(raw.cidr ?? ""),
    updatedAt: String(raw.updatedAt ?? ""),
    ...(Object.keys(unallocated).length > 0 ? { unallocated } : {}),
    incarnation: typeof raw.incarnation === "string" ? raw.incarnation : "",
    ...(typeof raw.renumberings === "number" ? { renumberings: raw.renumberings } : {}),
    ...(leaving.length > 0 ? { leaving } : {}),
  };
}
