/**
 * The pass plan (decision 155): every reason a touched mesh is passed, or skipped, as one table.
 * Each row starts from the same world (mesh shop: web on web-1 and web-2, db on db-1, extra on
 * db-1; every mesh's range recorded), arranges what the row needs, and plans one batch through
 * the real index update on the in-memory ports.
 */
import { describe, expect, it } from "vitest";
import { planPasses } from "../../functions/allocator/batch/plan-passes.ts";
import type { DataplaneChange } from "../../functions/allocator/membership-index/update.ts";
import { contributorId, readImages } from "../../functions/domain/contributions.ts";
import { dataplane } from "../fixtures/builders.ts";
import { World } from "./reconcile-world.ts";

const CIDR = "240.0.0.0/27";
const REVISION = { incarnation: "inc-1", version: 1 };

type Item = ReturnType<typeof dataplane>;

function sequenceOf(n: number): string {
  return String(n).padStart(40, "0");
}

/** A stream record of a dataplane (undefined image: created or deleted). */
function change(before: Item | undefined, after: Item | undefined, n: number): DataplaneChange {
  const item = (after ?? before) as Item;
  return {
    ...readImages({ mesh: item.mesh, name: item.name }, before, after),
    sequence: sequenceOf(n),
  };
}

/** What the decoder leaves for the planner: records by mesh (the key's and the images'). */
function batchOf(changes: DataplaneChange[], meshRecords: string[] = []) {
  const byMesh = new Map<string, string[]>();
  const add = (mesh: string, sequence: string) =>
    byMesh.set(mesh, [...(byMesh.get(mesh) ?? []), sequence]);
  for (const record of changes) {
    const meshes = new Set([
      record.key.mesh,
      ...[...record.before, ...record.after].map((p) => p.mesh),
    ]);
    for (const mesh of meshes) add(mesh, record.sequence);
  }
  for (const mesh of meshRecords) add(mesh, sequenceOf(900 + byMesh.size));
  return { byMesh, changes, meshRecords: new Set(meshRecords) };
}

const web1 = dataplane("shop", "web-1", ["web"]);
const web2 = dataplane("shop", "web-2", ["web"]);
const db1 = dataplane("shop", "db-1", ["db", "extra"]);

async function world(): Promise<World> {
  const w = new World({ mode: "index", cidr: CIDR });
  for (const item of [web1, web2, db1]) w.source.putDataplane(item);
  w.source.putMesh("shop");
  const seeded = await planPasses(
    batchOf([change(undefined, web1, 1), change(undefined, web2, 2), change(undefined, db1, 3)]),
    w.batchPorts(),
    CIDR,
  );
  // Their passes completed: the records' pending pairs go, as the batch step clears them.
  await w.index.setPending(seeded.pending.map((record) => ({ ...record, pending: [] })));
  await w.passState.setMeshRange("shop", CIDR, REVISION);
  return w;
}

interface Row {
  readonly why: string;
  readonly decision: string;
  readonly passed: boolean;
  readonly batch: (w: World) => Promise<ReturnType<typeof batchOf>>;
}

const moved = (item: Item): Item => ({
  ...item,
  networking: { ...item.networking, address: "10.9.9.9" },
});

const ROWS: readonly Row[] = [
  {
    why: "a restart (a new address, the same services)",
    decision: "073",
    passed: false,
    batch: async () => batchOf([change(web1, moved(web1), 10)]),
  },
  {
    why: "a second instance of a present service",
    decision: "073",
    passed: false,
    batch: async () => batchOf([change(undefined, dataplane("shop", "web-3", ["web"]), 10)]),
  },
  {
    why: "one of two contributors of a service leaves",
    decision: "073",
    passed: false,
    batch: async () => batchOf([change(web2, undefined, 10)]),
  },
  {
    why: "a new service",
    decision: "073",
    passed: true,
    batch: async () => batchOf([change(web1, dataplane("shop", "web-1", ["web", "cart"]), 10)]),
  },
  {
    why: "the last contributor of a service leaves",
    decision: "073",
    passed: true,
    batch: async () => batchOf([change(db1, dataplane("shop", "db-1", ["extra"]), 10)]),
  },
  {
    why: "the mesh's own record",
    decision: "073",
    passed: true,
    batch: async () => batchOf([], ["shop"]),
  },
  {
    why: "an entry removed that its record never listed (a dead attempt's)",
    decision: "110",
    passed: true,
    batch: async (w) => {
      // web-1's entry for extra was written by an attempt that died before its record.
      await w.index.write([
        {
          key: { mesh: "shop", name: "web-1" },
          add: [{ mesh: "shop", service: "extra" }],
          remove: [],
        },
      ]);
      return batchOf([change(dataplane("shop", "web-1", ["web", "extra"]), moved(web1), 10)]);
    },
  },
  {
    why: "a record carries the mesh's pass as pending",
    decision: "073",
    passed: true,
    batch: async (w) => {
      const key = { mesh: "shop", name: "web-2" };
      const record = (await w.index.getContributors([key])).get(contributorId(key));
      await w.index.setPending([
        { key, version: record?.version as number, pending: [{ mesh: "shop", service: "web" }] },
      ]);
      return batchOf([change(web2, moved(web2), 10)]);
    },
  },
  {
    why: "the mesh waits for an address",
    decision: "055, 111",
    passed: true,
    batch: async (w) => {
      await w.passState.setWaiting("shop", { waiting: true, item: REVISION });
      return batchOf([change(web1, moved(web1), 10)]);
    },
  },
  {
    why: "its range record names another range",
    decision: "055, 112",
    passed: true,
    batch: async (w) => {
      await w.passState.setMeshRange("shop", "10.0.0.0/24", { ...REVISION, version: 2 });
      return batchOf([change(web1, moved(web1), 10)]);
    },
  },
];

describe("the pass plan: which touched mesh is passed, and why", () => {
  it.each(ROWS)("$why (decision $decision): passed $passed", async (row) => {
    // Arrange
    const w = await world();
    const batch = await row.batch(w);

    // Act
    const plan = await planPasses(batch, w.batchPorts(), CIDR);

    // Assert
    expect(plan.meshes).toEqual(row.passed ? ["shop"] : []);
    expect(plan.skipped).toBe(row.passed ? 0 : 1);
  });

  it("passes every touched mesh over the tables without the index (the oracle)", async () => {
    // Arrange
    const w = await world();
    const { index: _index, ...ports } = w.batchPorts();

    // Act
    const plan = await planPasses(batchOf([change(web1, moved(web1), 10)]), ports, CIDR);

    // Assert
    expect(plan.meshes).toEqual(["shop"]);
    expect(plan.skipped).toBe(0);
    expect(plan.viewFor("shop")).toBeUndefined();
  });
});
