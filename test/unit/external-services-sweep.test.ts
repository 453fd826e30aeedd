/**
 * The repair sweep and the index rebuild with external services: what the event path never saw
 * (records lost, data written before the stream) is found in the external-services table and
 * corrected, like a dataplane's; a second cycle repairs nothing.
 */

import { describe, expect, it } from "vitest";
import { decidePasses } from "../../functions/allocator/batch/plan-passes.ts";
import { rebuildIndex } from "../../functions/allocator/membership-index/rebuild.ts";
import { updateIndex } from "../../functions/allocator/membership-index/update.ts";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import { readImages } from "../../functions/domain/contributions.ts";
import { hostEntry } from "../../functions/domain/hosts.ts";
import { dataplane, externalService } from "../fixtures/builders.ts";
import { InMemoryMembershipIndex } from "../fixtures/in-memory-ports.ts";
import { World } from "./reconcile-world.ts";

function run(world: World) {
  return sweep(
    {
      source: world.source,
      vipItems: world.vipItems,
      claims: world.claims,
      passState: world.passState,
      index: world.index,
      telemetry: world.telemetry,
    },
    { ...world.batchSettings() },
  );
}

describe("the repair sweep with external services", () => {
  it("gives external services written before any stream their VIPs, and a second cycle repairs nothing", async () => {
    // Arrange: tables with data and no stream history
    const world = new World({ mode: "index" });
    world.source.putMesh("default");
    world.source.putMesh("other");
    world.source.putDataplane(dataplane("default", "web-1", ["web"]));
    world.source.putExternalService(
      externalService("default", "httpbin", "httpbin", "httpbin.org:443"),
    );
    world.source.putExternalService(externalService("other", "web-ext", "web", "web.example:80"));

    // Act
    const first = await run(world);
    const second = await run(world);

    // Assert
    expect(first.repairs.filter((r) => r.kind === "index-drift")).toHaveLength(3);
    expect(Object.keys(world.vips("default") ?? {}).sort()).toEqual(
      [hostEntry("httpbin.org"), "httpbin", "web"].sort(),
    );
    expect(world.vips("other")?.web).toBe(world.vips("default")?.web);
    expect(world.violations()).toEqual([]);
    expect(second.repairs).toEqual([]);
  });

  it("removes what a deleted external service left in the index when its record was lost", async () => {
    // Arrange: an external service indexed from its record, then deleted with the record lost
    const world = new World({ mode: "index" });
    world.source.putMesh("default");
    const es = externalService("default", "api", "api", "api.example.com:443");
    world.source.putExternalService(es);
    await updateIndex(
      [
        {
          ...readImages({ mesh: "default", name: "api", kind: "external-service" }, undefined, es),
          sequence: "1".padStart(40, "0"),
        },
      ],
      world.index,
      decidePasses,
    );
    await run(world);
    expect(world.vips("default")?.[hostEntry("api.example.com")]).toBeDefined();
    world.source.deleteExternalService("default", "api");

    // Act
    const repaired = await run(world);

    // Assert
    expect(repaired.repairs.map((r) => r.kind)).toContain("index-drift");
    expect(world.vips("default")).toEqual({});
    expect(world.violations()).toEqual([]);
  });

  it("rebuilds the index from both tables; an index that dropped the table loses its entries", async () => {
    const world = new World({ mode: "index" });
    world.source.putMesh("default");
    world.source.putDataplane(dataplane("default", "web-1", ["web"]));
    world.source.putExternalService(externalService("default", "es", "web", "web.example.com:1"));
    const index = new InMemoryMembershipIndex();

    const built = await rebuildIndex(world.source, index);
    expect(built.dataplanes).toBe(2);
    expect(await index.servicesOf("default")).toEqual([hostEntry("web.example.com"), "web"].sort());
    const records = await index.recordsOf("default", true, "external-service");
    expect(records.map((record) => record.key)).toEqual([
      { mesh: "default", name: "es", kind: "external-service" },
    ]);

    // The deployment drops the table (the item is still there): its external services read as none.
    world.source.externalServices = false;
    await rebuildIndex(world.source, index);
    expect(await index.servicesOf("default")).toEqual(["web"]);
  });
});
