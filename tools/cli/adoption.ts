import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import type { SweepPorts, SweepSettings } from "../../functions/allocator/sweep/types.ts";
import type { AdoptEntry } from "../../functions/domain/adopt-entries.ts";
import { type AdoptPlan, type AdoptState, adoptedName } from "../../functions/domain/adopt-plan.ts";
import type { VipPool } from "../../functions/domain/pool.ts";
import { own } from "../../functions/domain/records.ts";

/**
 * `vips adopt` against the tables: the state read before planning, then the plan applied. Each
 * claim is written as the event path writes a new one (create-if-absent, service and address in
 * one transaction; store/claim-writes.ts), so adoption is safe while events flow: a pass that
 * claimed the service or the address first wins, and the adoption reports it. Then each named
 * mesh is passed as `vips reconcile MESH` does (its index checked, then an ordinary pass, which
 * joins the adopted claims of the services its dataplanes provide), and a written claim that no
 * mesh joined is released (its quarantine starts, so its VIP goes to no other service for
 * VIP_QUARANTINE_SECONDS; the service gets it back if it appears meanwhile).
 */

/** The claims of the services and of the in-range addresses the entries name. */
export async function readAdoptState(
  claims: SweepPorts["claims"],
  entries: readonly AdoptEntry[],
  pool: VipPool,
): Promise<AdoptState> {
  const services = entries.filter((entry) => adoptedName(entry) !== undefined);
  const names = [...new Set(services.map((entry) => adoptedName(entry) as string))];
  const vips = [
    ...new Set(
      services.flatMap((entry) => {
        const vip = pool.canonical(entry.vip);
        return vip === undefined ? [] : [vip];
      }),
    ),
  ];
  const serviceClaims = await claims.getServices(names);
  const addressClaims = await claims.getAddresses(vips);
  return {
    services: new Map([...serviceClaims].map(([service, claim]) => [service, claim.vip])),
    addresses: new Map([...addressClaims].map(([vip, claim]) => [vip, claim.owner])),
  };
}

/** What happened to one claim the plan wrote. */
export type WriteResult =
  | { readonly service: string; readonly vip: string; readonly written: true }
  | {
      readonly service: string;
      readonly vip: string;
      readonly written: false;
      /** What a concurrent pass claimed first: the service (at `now`) or the address (for `owner`). */
      readonly lost: "service" | "address";
      readonly now?: string;
      readonly owner?: string;
    };

export interface MeshListing {
  readonly mesh: string;
  /** False when the mesh is not in the meshes table (it gets no item). */
  readonly exists: boolean;
  /** Adopted services (claims of this run, or in place) the mesh's item lists, with their VIP. */
  readonly listed: ReadonlyMap<string, string>;
  /** Services of the file for this mesh the item does not list (no dataplane provides them). */
  readonly notListed: readonly string[];
}

export interface AdoptionResult {
  readonly writes: readonly WriteResult[];
  /** Written claims no mesh joined: released (quarantined) at once. */
  readonly released: readonly string[];
  readonly meshes: readonly MeshListing[];
  /** Corrections the meshes' passes made (items created, services added, ...). */
  readonly repairs: number;
}

/** Runs `work` over `items`, at most `limit` at once, in order of start. */
async function eachLimited<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

export async function applyAdoption(
  ports: SweepPorts,
  settings: SweepSettings,
  plan: AdoptPlan,
  options: { readonly concurrency?: number } = {},
): Promise<AdoptionResult> {
  if (plan.refused) throw new Error("a refused plan is never applied");
  const { claims } = ports;
  const { pool } = settings;
  const writes: WriteResult[] = [];
  await eachLimited([...plan.claims], options.concurrency ?? 16, async ([service, vip]) => {
    const outcome = await claims.adopt({ service, vip, nowMs: settings.now() });
    if (outcome === "ok") {
      writes.push({ service, vip, written: true });
      return;
    }
    // Lost to a pass (or another adoption): report what it claimed; never retried elsewhere.
    const claim = (await claims.getServices([service])).get(service);
    const owner = (await claims.getAddresses([vip])).get(vip)?.owner;
    if (claim?.vip === vip && owner === service) {
      writes.push({ service, vip, written: true });
      return;
    }
    writes.push({
      service,
      vip,
      written: false,
      lost: outcome === "service-changed" ? "service" : "address",
      ...(claim !== undefined ? { now: claim.vip } : {}),
      ...(owner !== undefined ? { owner } : {}),
    });
  });
  writes.sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0));
  const written = writes.filter((w) => w.written);
  if (written.length > 0) {
    // The range's claim count, as a pass that claims addresses adds to it; the next-fit cursor
    // past the highest adopted address (a hint: new services then start after the block).
    const offsets = written.flatMap((w) => {
      const offset = pool.offsetOf(w.vip);
      return offset === undefined ? [] : [offset];
    });
    let highest = -1n;
    for (const offset of offsets) if (offset > highest) highest = offset;
    const cursor = await claims.readCursor(pool.cidr);
    const next = highest + 1n < pool.size && highest + 1n > cursor ? highest + 1n : cursor;
    await claims.advanceCursor(pool.cidr, next, offsets.length);
  }
  // Each named mesh passed now, as `vips reconcile MESH` does.
  const result = await sweep(ports, settings, { meshes: plan.meshes });
  const released: string[] = [];
  const after = await claims.getServices(written.map((w) => w.service));
  for (const w of written) {
    const claim = after.get(w.service);
    if (claim === undefined || claim.meshes.size > 0 || claim.releasedAt !== undefined) continue;
    if (claim.vip !== w.vip) continue;
    const done = await claims.release({ service: w.service, vip: w.vip, nowMs: settings.now() });
    if (done) released.push(w.service);
  }
  const meshes: MeshListing[] = [];
  for (const mesh of plan.meshes) {
    const exists = await ports.source.meshExists(mesh);
    const item = await ports.vipItems.get(mesh);
    const listed = new Map<string, string>();
    const notListed: string[] = [];
    const names = new Set(
      plan.decisions
        .filter((d) => d.entry.mesh === mesh && adoptedName(d.entry) !== undefined)
        .map((d) => adoptedName(d.entry) as string),
    );
    for (const service of [...names].sort()) {
      const vip = own(item?.vips, service);
      if (vip === undefined) notListed.push(service);
      else listed.set(service, vip);
    }
    meshes.push({ mesh, exists, listed, notListed });
  }
  return { writes, released, meshes, repairs: result.repairs.length };
}
