import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { processBatch } from "../../functions/allocator/batch/process-batch.ts";
import { METRIC } from "../../functions/allocator/telemetry-names.ts";
import { AllocatorError, VipItemTooLargeError } from "../../functions/domain/errors.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import type { ItemRevision, ItemWriteResult } from "../../functions/store/ports.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import { encodeVipItem, ITEM_MAX_BYTES } from "../../functions/store/vip-item-codec.ts";
import { dataplane, dataplaneRecord } from "../fixtures/builders.ts";
import { InMemoryVipItemStore } from "../fixtures/in-memory-ports.ts";
import { World } from "./reconcile-world.ts";

/** A VIP item store whose items hold at most `max` services (DynamoDB's limit, scaled down). */
class SmallItems extends InMemoryVipItemStore {
  constructor(private readonly max: number) {
    super();
  }

  override async put(item: VipItem, expected: ItemRevision | undefined): Promise<ItemWriteResult> {
    const count = Object.keys(item.vips).length;
    if (count > this.max) throw new VipItemTooLargeError(item.mesh, count * 1000, this.max * 1000);
    return await super.put(item, expected);
  }
}

const TABLES = resolveTableNames({});

describe("a mesh whose VIP item outgrows the item limit", () => {
  it("keeps its last good item, reports the services that do not fit, and fails nothing", async () => {
    // Arrange: two services fit; a third arrives
    const world = new World();
    const vipItems = new SmallItems(2);
    world.source.putMesh("m");
    world.source.putDataplane(dataplane("m", "dp-1", ["a", "b"]));
    await world.reconcile("m", { vipItems });
    world.source.putDataplane(dataplane("m", "dp-2", ["c"]));

    // Act
    const response = await processBatch(
      {
        Records: [dataplaneRecord(TABLES.dataplanes, { newImage: dataplane("m", "dp-2", ["c"]) })],
      },
      {
        source: world.source,
        vipItems,
        claims: world.claims,
        passState: world.passState,
        telemetry: world.telemetry,
      },
      { ...world.batchSettings(), tables: TABLES, concurrency: 4 },
    );

    // Assert
    expect(response).toEqual({ batchItemFailures: [] });
    expect(vipItems.peek("m")).toMatchObject({
      version: 1,
      vips: { a: "240.0.0.0", b: "240.0.0.1" },
    });
    expect(world.telemetry.total(METRIC.itemTooLarge)).toBe(1);
    const [line] = world.telemetry.linesAt("error");
    expect(line?.data).toMatchObject({ mesh: "m", servicesNotWritten: ["c"], keptVersion: 1 });
    // c's VIP is held for it (a claim kept longer is safe; no other service can take it)
    expect(world.claims.serviceClaim("c")?.vip).toBe("240.0.0.2");
  });

  it("is an AllocatorError that says a retry cannot help, from the codec", () => {
    // Arrange: names that do not compress, far beyond the limit
    const vips: Record<string, string> = {};
    for (let i = 0; i < 40_000; i++)
      vips[randomBytes(12).toString("hex")] = `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`;
    const item: VipItem = {
      mesh: "big",
      version: 1,
      vips,
      cidr: "10.0.0.0/8",
      updatedAt: "t",
      incarnation: "i",
    };

    // Act
    let thrown: unknown;
    try {
      encodeVipItem(item);
    } catch (error) {
      thrown = error;
    }

    // Assert
    expect(thrown).toBeInstanceOf(VipItemTooLargeError);
    expect(thrown).toBeInstanceOf(AllocatorError);
    expect((thrown as VipItemTooLargeError).retryable).toBe(false);
    expect((thrown as VipItemTooLargeError).limit).toBe(ITEM_MAX_BYTES);
  });
});
