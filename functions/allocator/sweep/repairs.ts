import { own } from "../../domain/records.ts";
import type { IndexDrift } from "../membership-index/rebuild.ts";
import type { MeshOutcome } from "../pass/deps.ts";
import type { Repair } from "./types.ts";

/** The repairs a sweep's pass of a mesh made, by what it changed in the item. */
export function repairsOf(mesh: string, outcome: MeshOutcome): Repair[] {
  if (outcome.action === "created") {
    return [
      {
        kind: "item-missing",
        mesh,
        detail: { services: Object.keys(outcome.added).length, version: outcome.version },
      },
    ];
  }
  if (outcome.action === "deleted") {
    return [{ kind: "item-of-deleted-mesh", mesh, detail: { version: outcome.version } }];
  }
  if (outcome.action !== "updated") return [];
  const repairs: Repair[] = [];
  for (const [service, vip] of Object.entries(outcome.added)) {
    const old = own(outcome.renumbered, service);
    if (old !== undefined) {
      repairs.push({ kind: "item-renumbered", mesh, service, detail: { from: old, to: vip } });
    } else repairs.push({ kind: "item-services-added", mesh, service, detail: { vip } });
  }
  for (const [service, vip] of Object.entries(outcome.removed)) {
    repairs.push({ kind: "item-services-removed", mesh, service, detail: { vip } });
  }
  return repairs;
}

/** An index repair's detail: the dataplane and what its entries or record lacked. */
export function driftDetail(found: IndexDrift): Record<string, unknown> {
  return {
    dataplane: found.dataplane.name,
    dataplaneMesh: found.dataplane.mesh,
    missing: found.missing.map((pair) => pair.service),
    orphan: found.orphan.map((pair) => pair.service),
    staleRecord: found.staleRecord,
  };
}
