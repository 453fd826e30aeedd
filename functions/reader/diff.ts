/**
 * What changed between two views of the vips table: pure functions, used by the reader's
 * `refresh()`/`watch()` and, on a `vips` stream record's images, by a change-feed consumer.
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { fromAttributeMap, type PlainRecord } from "../store/attribute-values.ts";
import { VipReaderError } from "./errors.ts";
import { type MeshView, meshViewOf } from "./snapshot.ts";

export interface VipEntry {
  readonly service: string;
  readonly vip: string;
}

export interface VipChange {
  readonly service: string;
  readonly from: string;
  readonly to: string;
}

/** One mesh's change. Lists are sorted by service. */
export interface MeshDiff {
  readonly mesh: string;
  /** `added`: the mesh's item appeared; `removed`: it went; `changed`: its VIPs changed. */
  readonly change: "added" | "removed" | "changed";
  readonly version: number | undefined;
  readonly previousVersion: number | undefined;
  readonly added: readonly VipEntry[];
  readonly removed: readonly VipEntry[];
  /** Renumbered services (e.g. after a `VIP_CIDR` change). */
  readonly changed: readonly VipChange[];
  /**
   * External services' hosts that changed, as above (`service` names the host); present only
   * when some did. A change of hosts alone is a change of the mesh.
   */
  readonly hosts?: {
    readonly added: readonly VipEntry[];
    readonly removed: readonly VipEntry[];
    readonly changed: readonly VipChange[];
  };
}

/** What one refresh changed. Empty lists when nothing did. */
export interface SnapshotDiff {
  readonly meshesAdded: readonly string[];
  readonly meshesRemoved: readonly string[];
  /** One entry per mesh whose VIPs (or existence) changed, sorted by mesh. */
  readonly meshes: readonly MeshDiff[];
}

const byText = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The change of one mesh between two views (undefined: no item). Undefined when nothing a
 * reader resolves changed: a new version that changes only `unallocated` or private
 * attributes is not a change of VIPs.
 */
export function diffMesh(
  mesh: string,
  before: MeshView | undefined,
  after: MeshView | undefined,
): MeshDiff | undefined {
  if (before === undefined && after === undefined) return undefined;
  const { added, removed, changed } = diffEntries(before?.vips, after?.vips);
  const hosts = diffEntries(before?.hosts, after?.hosts);
  const hostCount = hosts.added.length + hosts.removed.length + hosts.changed.length;
  const change = before === undefined ? "added" : after === undefined ? "removed" : "changed";
  if (change === "changed" && added.length + removed.length + changed.length + hostCount === 0) {
    return undefined;
  }
  return {
    mesh,
    change,
    version: after?.version,
    previousVersion: before?.version,
    added,
    removed,
    changed,
    ...(hostCount > 0 ? { hosts } : {}),
  };
}

/** Entries added, removed and changed between two name -> VIP maps, each sorted by name. */
function diffEntries(
  before: ReadonlyMap<string, string> | undefined,
  after: ReadonlyMap<string, string> | undefined,
): { added: VipEntry[]; removed: VipEntry[]; changed: VipChange[] } {
  const oldVips = before ?? new Map<string, string>();
  const newVips = after ?? new Map<string, string>();
  const added: VipEntry[] = [];
  const removed: VipEntry[] = [];
  const changed: VipChange[] = [];
  for (const [service, vip] of newVips) {
    const old = oldVips.get(service);
    if (old === undefined) added.push({ service, vip });
    else if (old !== vip) changed.push({ service, from: old, to: vip });
  }
  for (const [service, vip] of oldVips) {
    if (!newVips.has(service)) removed.push({ service, vip });
  }
  const sort = <T extends { service: string }>(list: T[]): T[] =>
    list.sort((a, b) => byText(a.service, b.service));
  return { added: sort(added), removed: sort(removed), changed: sort(changed) };
}

/** The changes between two sets of mesh views. */
export function diffSnapshots(
  before: ReadonlyMap<string, MeshView>,
  after: ReadonlyMap<string, MeshView>,
): SnapshotDiff {
  const names = new Set([...before.keys(), ...after.keys()]);
  const meshes: MeshDiff[] = [];
  for (const mesh of [...names].sort(byText)) {
    const diff = diffMesh(mesh, before.get(mesh), after.get(mesh));
    if (diff !== undefined) meshes.push(diff);
  }
  return {
    meshesAdded: meshes.filter((d) => d.change === "added").map((d) => d.mesh),
    meshesRemoved: meshes.filter((d) => d.change === "removed").map((d) => d.mesh),
    meshes,
  };
}

export function isEmptyDiff(diff: SnapshotDiff): boolean {
  return diff.meshes.length === 0;
}

/** A one-line summary: `+2 -1 ~0 VIPs in 2 meshes (meshes +1 -0)`. */
export function summarizeDiff(diff: SnapshotDiff): string {
  let added = 0;
  let removed = 0;
  let changed = 0;
  for (const mesh of diff.meshes) {
    added += mesh.added.length;
    removed += mesh.removed.length;
    changed += mesh.changed.length;
  }
  const count = diff.meshes.length;
  return `+${added} -${removed} ~${changed} VIPs in ${count} mesh${count === 1 ? "" : "es"} (meshes +${diff.meshesAdded.length} -${diff.meshesRemoved.length})`;
}

/**
 * The part of a DynamoDB stream record a diff needs: Lambda's `DynamoDBRecord` (binary values
 * as base64 strings) and the DynamoDB Streams SDK's records (binary values as bytes) both fit.
 */
export interface VipStreamRecord {
  readonly eventName?: string;
  readonly dynamodb?: {
    readonly NewImage?: Record<string, unknown>;
    readonly OldImage?: Record<string, unknown>;
  };
}

function imageView(image: Record<string, unknown> | undefined): MeshView | undefined {
  if (image === undefined) return undefined;
  let raw: PlainRecord;
  try {
    raw = fromAttributeMap(image as Record<string, AttributeValue>);
  } catch (error) {
    throw new VipReaderError(
      "MALFORMED_ITEM",
      `stream image is not a DynamoDB item: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  // Lambda delivers binary attributes as base64 text.
  if (typeof raw.vipsGz === "string") raw.vipsGz = Buffer.from(raw.vipsGz, "base64");
  const { view, issues } = meshViewOf(raw);
  if (view === undefined) {
    const issue = issues[0];
    throw new VipReaderError(
      "MALFORMED_ITEM",
      `stream image of mesh ${String(issue?.mesh)}: ${issue?.reason ?? "not a VIP item"}`,
    );
  }
  return view;
}

/**
 * What a `vips` stream record (view type `NEW_AND_OLD_IMAGES`) changed: its old image against
 * its new one, in either stored format. Undefined when no VIP changed. Throws a
 * {@link VipReaderError} `MALFORMED_ITEM` when an image is not a VIP item (a
 * `KEYS_ONLY` or `NEW_IMAGE` stream lacks the old image and cannot be diffed).
 */
export function diffStreamRecord(record: VipStreamRecord): MeshDiff | undefined {
  const before = imageView(record.dynamodb?.OldImage);
  const after = imageView(record.dynamodb?.NewImage);
  const mesh = after?.mesh ?? before?.mesh;
  if (mesh === undefined) {
    throw new VipReaderError("MALFORMED_ITEM", "stream record has neither a new nor an old image");
  }
  return diffMesh(mesh, before, after);
}
