import type { SweepRun } from "./run.ts";

/** Phase 2, each item of the vips table: items of meshes that no longer exist are removed. */
export async function sweepItem(run: SweepRun, mesh: string): Promise<void> {
  if (run.deferring()) {
    // First look: a mesh deleted a moment ago may have its record still on the way.
    if (await run.ports.source.meshExists(mesh)) return;
    run.pending.push({ phase: "items", name: mesh, at: run.settings.now(), found: "deleted" });
    return;
  }
  await correctItem(run, mesh);
}

/**
 * The item of a mesh that is gone is removed by the mesh's pass (dry: reported). The meshes
 * waiting for an address that its releases freed (no quarantine) are passed after the page.
 */
export async function correctItem(run: SweepRun, mesh: string): Promise<void> {
  if (await run.ports.source.meshExists(mesh)) return;
  const { repairs, wake } = await run.corrector.passDeletedMesh(mesh);
  for (const repair of repairs) run.record(repair);
  for (const other of wake) run.woken.add(other);
}
