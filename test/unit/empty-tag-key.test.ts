/**
 * A tag map with an empty-string key. DynamoDB and DynamoDB Local reject such an item
 * (`ValidationException: Empty attribute name`), so it can never reach the function; moto_server
 * stores it and streams it in a form of its own (test/unit/lambda-record.test.ts and
 * shard-reader.test.ts cover how the local poller reads that). The allocator still reads a
 * record carrying one, on hand-made records through the real batch step.
 */
import { describe, expect, it } from "vitest";
import { processBatch } from "../../functions/allocator/batch/process-batch.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import { dataplane, dataplaneRecord } from "../fixtures/builders.ts";
import { World } from "./reconcile-world.ts";

const TABLES = resolveTableNames({});

describe("a dataplane whose tag map has an empty-string key", () => {
  it("is read, and its service and the batch's other services get VIPs", async () => {
    // Arrange
    const world = new World({ cidr: "10.0.0.0/24" });
    world.source.putMesh("default");
    const odd = dataplane("default", "dp-1", [{ service: "web", tags: { "": "empty-key" } }]);
    const plain = dataplane("default", "dp-2", ["api"]);
    world.source.putDataplane(odd);
    world.source.putDataplane(plain);
    const records = [odd, plain].map((item) =>
      dataplaneRecord(TABLES.dataplanes, { newImage: item }),
    );
    expect(records[0]?.dynamodb?.NewImage?.networking?.M?.inbound?.L?.[0]?.M?.tags?.M).toEqual({
      "": { S: "empty-key" },
      "kuma.io/service": { S: "web" },
    });

    // Act
    const response = await processBatch(
      { Records: records },
      {
        source: world.source,
        vipItems: world.vipItems,
        claims: world.claims,
        passState: world.passState,
        telemetry: world.telemetry,
      },
      { ...world.batchSettings(), tables: TABLES, concurrency: 4 },
    );

    // Assert
    expect(response).toEqual({ batchItemFailures: [] });
    expect(Object.keys(world.vipItems.peek("default")?.vips ?? {}).sort()).toEqual(["api", "web"]);
  });
});
