import type { InputIssue } from "./errors.ts";
import { EXTERNAL_SERVICE_TYPE, readExternalService } from "./external-service.ts";
import { compareServices, readDataplane } from "./service-set.ts";
import type { DataplaneRecord } from "./types.ts";

/** One (mesh, service) pair a dataplane puts in a mesh's service set. */
export interface Contribution {
  readonly mesh: string;
  readonly service: string;
}

/** The contributors other than dataplanes: external services (the optional third table). */
export type ContributorKind = "external-service";

/**
 * A contributor's key: a dataplane's in the dataplanes table, or (with `kind`) an external
 * service's in the external-services table (the same key shape, mesh and name).
 */
export interface ContributorKey {
  readonly mesh: string;
  readonly name: string;
  readonly kind?: ContributorKind;
}

/**
 * One string per contributor key, unambiguous whatever the names hold: `[mesh, name]` for a
 * dataplane, `[mesh, name, "ExternalService"]` for an external service.
 */
export function contributorId(key: ContributorKey): string {
  return key.kind === "external-service"
    ? JSON.stringify([key.mesh, key.name, EXTERNAL_SERVICE_TYPE])
    : JSON.stringify([key.mesh, key.name]);
}

export function parseContributorId(id: string): ContributorKey {
  const parsed: unknown = JSON.parse(id);
  if (
    !Array.isArray(parsed) ||
    (parsed.length !== 2 && !(parsed.length === 3 && parsed[2] === EXTERNAL_SERVICE_TYPE)) ||
    typeof parsed[0] !== "string" ||
    typeof parsed[1] !== "string"
  ) {
    throw new Error(`not a contributor id: ${id}`);
  }
  return parsed.length === 3
    ? { mesh: parsed[0], name: parsed[1], kind: "external-service" }
    : { mesh: parsed[0], name: parsed[1] };
}

/** The key of a contributor (without whatever else the value carries). */
export function contributorKey(key: ContributorKey): ContributorKey {
  return key.kind === undefined
    ? { mesh: key.mesh, name: key.name }
    : { mesh: key.mesh, name: key.name, kind: key.kind };
}

function pairId(pair: Contribution): string {
  return JSON.stringify([pair.mesh, pair.service]);
}

function comparePairs(a: Contribution, b: Contribution): number {
  return compareServices(a.mesh, b.mesh) || compareServices(a.service, b.service);
}

/**
 * What one dataplane contributes now, by the same rules as the full service set (an inbound of
 * its own mesh, or an ingress's advertisement for the mesh it names). `item` undefined: the
 * dataplane is gone (or could not be decoded) and contributes nothing. Sorted, deduplicated.
 */
export function contributionsOf(
  key: ContributorKey,
  item: unknown,
): { contributions: Contribution[]; issues: InputIssue[] } {
  if (item === undefined) return { contributions: [], issues: [] };
  const record: DataplaneRecord = { ...contributorKey(key), item };
  const read =
    key.kind === "external-service" ? readExternalService(record) : readDataplane(record);
  const contributions: Contribution[] = [];
  for (const [mesh, services] of read.services) {
    for (const service of services) contributions.push({ mesh, service });
  }
  return { contributions: contributions.sort(comparePairs), issues: [...read.issues] };
}

/**
 * A dataplane stream record's images, read once (by the record decoder): what the old image
 * contributed and what the new one contributes, with the new image's issues. A missing or
 * undecodable image contributes nothing.
 */
export interface ContributorImages {
  readonly key: ContributorKey;
  readonly before: readonly Contribution[];
  readonly after: readonly Contribution[];
  /** Skipped pieces of the new image (bad input). */
  readonly issues: readonly InputIssue[];
}

export function readImages(
  key: ContributorKey,
  oldImage: unknown,
  newImage: unknown,
): ContributorImages {
  const next = contributionsOf(key, newImage);
  return {
    key,
    before: contributionsOf(key, oldImage).contributions,
    after: next.contributions,
    issues: next.issues,
  };
}

/** The contributor entries to add and to remove to go from `before` to `after`. */
export function diffContributions(
  before: readonly Contribution[],
  after: readonly Contribution[],
): { added: Contribution[]; removed: Contribution[] } {
  const had = new Set(before.map(pairId));
  const has = new Set(after.map(pairId));
  return {
    added: after.filter((pair) => !had.has(pairId(pair))),
    removed: before.filter((pair) => !has.has(pairId(pair))),
  };
}

export function sameContributions(a: readonly Contribution[], b: readonly Contribution[]) {
  const { added, removed } = diffContributions(a, b);
  return added.length === 0 && removed.length === 0;
}

/** Services per mesh named by some contributions (the pairs a mesh pass must look at). */
export function servicesByMesh(
  pairs: Iterable<Contribution>,
  into: Map<string, Set<string>> = new Map(),
): Map<string, Set<string>> {
  for (const { mesh, service } of pairs) {
    let set = into.get(mesh);
    if (set === undefined) {
      set = new Set();
      into.set(mesh, set);
    }
    set.add(service);
  }
  return into;
}

/**
 * A mesh's service set after a delta: the services its item lists, with each `touched`
 * service present or not as the index says now. Sorted.
 */
export function applyPresence(
  listed: Iterable<string>,
  touched: Iterable<string>,
  present: ReadonlySet<string>,
): string[] {
  const services = new Set(listed);
  for (const service of touched) {
    if (present.has(service)) services.add(service);
    else services.delete(service);
  }
  return [...services].sort(compareServices);
}

/** Stream sequence numbers as fixed-width strings, so they order as numbers do. */
export const SEQUENCE_WIDTH = 40;

export function paddedSequence(sequence: string): string {
  return sequence.padStart(SEQUENCE_WIDTH, "0");
}
