import type { ReconcileDeps } from "./deps.ts";
import { type ServiceSetView, tablesView } from "./service-set-view.ts";

/** Where the pass reads the mesh's service set: its view, or the full recompute. */
export function viewOf(deps: ReconcileDeps): ServiceSetView {
  return deps.view ?? tablesView(deps.source, deps.ingresses);
}

/**
 * After a write, the inputs are read again: the version condition protects against a stale
 * *item*, not against stale *tables*. A concurrent pass that read newer tables may have found
 * nothing to change and written nothing, so the last writer must check that what it wrote is
 * still what the tables say; if not, it goes round again.
 */
export async function inputsStill(
  mesh: string,
  deps: ReconcileDeps,
  exists: boolean,
  services: readonly string[],
): Promise<boolean> {
  if ((await deps.source.meshExists(mesh)) !== exists) return false;
  if (!exists) return true;
  return await viewOf(deps).still(mesh, services);
}
