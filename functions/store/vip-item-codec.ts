import { gunzipSync, gzipSync } from "node:zlib";
import { VipItemTooLargeError } from "../domain/errors.ts";
import { hostEntry, hostOfEntry, isHostEntry, joinHosts, splitHosts } from "../domain/hosts.ts";
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
 *
 * Hosts of external services (kept by the allocator among `vips` and `unallocated` under
 * `host/<host>`) are stored apart, so readers of `vips` see services only: `hosts` and
 * `unallocatedHosts` (maps, only when not empty; in format 2, in the JSON). Services and hosts a
 * pass has not reached yet (decision 160) are `pending` and `pendingHosts` (lists of strings,
 * only when not empty; in format 2, in the JSON).
 */
export type StoredVipItem = Record<string, unknown>;

/** Encodes an item, choosing the compact format only when the plain one is too large. */
export function encodeVipItem(item: VipItem): { stored: StoredVipItem; bytes: number } {
  const {
    vips: all,
    unallocated: allUnallocated,
    leaving,
    pending: allPending,
    hosts: _h,
    unallocatedHosts: _u,
    pendingHosts: _p,
    ...rest
  } = item;
  const { services: vips, hosts } = splitHosts(all);
  const split = allUnallocated === undefined ? undefined : splitHosts(allUnallocated);
  const unallocated = split?.services;
  const unallocatedHosts = split?.hosts ?? {};
  const pending = (allPending ?? []).filter((name) => !isHostEntry(name));
  const pendingHosts = (allPending ?? []).filter(isHostEntry).map(hostOfEntry);
  const extra = {
    ...(Object.keys(hosts).length > 0 ? { hosts } : {}),
    ...(Object.keys(unallocatedHosts).length > 0 ? { unallocatedHosts } : {}),
    ...(pending.length > 0 ? { pending } : {}),
    ...(pendingHosts.length > 0 ? { pendingHosts } : {}),
  };
  const plain: StoredVipItem = {
    ...rest,
    vips,
    ...(unallocated ? { unallocated } : {}),
    ...(leaving && leaving.length > 0 ? { leaving } : {}),
    ...extra,
  };
  const plainBytes = itemSizeBytes(plain);
  if (plainBytes <= PLAIN_FORMAT_MAX_BYTES) return { stored: plain, bytes: plainBytes };
  const payload = JSON.stringify({
    vips,
    unallocated: unallocated ?? {},
    leaving: leaving ?? [],
    ...extra,
  });
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

/**
 * Reads a stored VIP item in either format (the project's reader for downstream code): `vips`
 * and `unallocated` hold services only; `hosts` and `unallocatedHosts` (present only when not
 * empty) the hosts of external services.
 */
export function decodeVipItem(raw: StoredVipItem): VipItem {
  const { hosts, unallocatedHosts, pendingHosts, ...item } = decodeStored(raw);
  return {
    ...item,
    ...(Object.keys(hosts).length > 0 ? { hosts } : {}),
    ...(Object.keys(unallocatedHosts).length > 0 ? { unallocatedHosts } : {}),
    ...(pendingHosts.length > 0 ? { pendingHosts } : {}),
  };
}

/**
 * Reads a stored VIP item as the allocator keeps it: hosts among `vips` and `unallocated` under
 * their entry names `host/<host>` (the allocator's stores, its checks and the benches).
 */
export function decodeAllocatorItem(raw: StoredVipItem): VipItem {
  const { hosts, unallocatedHosts, pendingHosts, ...item } = decodeStored(raw);
  const noHosts = Object.keys(hosts).length === 0 && Object.keys(unallocatedHosts).length === 0;
  if (noHosts && pendingHosts.length === 0) return item;
  const unallocated = joinHosts(item.unallocated ?? {}, unallocatedHosts);
  const pending = [...(item.pending ?? []), ...pendingHosts.map(hostEntry)];
  return {
    ...item,
    vips: joinHosts(item.vips, hosts),
    ...(Object.keys(unallocated).length > 0 ? { unallocated } : {}),
    ...(pending.length > 0 ? { pending } : {}),
  };
}

function decodeStored(raw: StoredVipItem): VipItem & {
  hosts: Record<string, string>;
  unallocatedHosts: Record<string, string>;
  pendingHosts: string[];
} {
  let vips = stringRecord(raw.vips);
  let unallocated = stringRecord(raw.unallocated);
  let leaving = stringList(raw.leaving);
  let hosts = stringRecord(raw.hosts);
  let unallocatedHosts = stringRecord(raw.unallocatedHosts);
  let pending = stringList(raw.pending);
  let pendingHosts = stringList(raw.pendingHosts);
  if (Number(raw.format) === 2) {
    const bytes = raw.vipsGz;
    if (!(bytes instanceof Uint8Array)) {
      throw new Error(`VIP item of mesh ${String(raw.mesh)}: format 2 without vipsGz`);
    }
    const payload = JSON.parse(gunzipSync(bytes).toString("utf8")) as Record<string, unknown>;
    vips = stringRecord(payload.vips);
    unallocated = stringRecord(payload.unallocated);
    leaving = stringList(payload.leaving);
    hosts = stringRecord(payload.hosts);
    unallocatedHosts = stringRecord(payload.unallocatedHosts);
    pending = stringList(payload.pending);
    pendingHosts = stringList(payload.pendingHosts);
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
    ...(pending.length > 0 ? { pending } : {}),
    hosts,
    unallocatedHosts,
    pendingHosts,
  };
}
