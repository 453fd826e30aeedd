/**
 * The store contract (test/fixtures/store-contract.ts) on the DynamoDB adapters, on the local
 * engine of the vitest project (DynamoDB Local, moto_server); the in-memory doubles run it in
 * test/unit/in-memory-ports.test.ts. And the two MeshSource implementations side by side: the
 * same data in both, every method's answers compared.
 */
import { DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toAttributeMap } from "../../functions/store/attribute-values.ts";
import { ClaimStoreLogic } from "../../functions/store/claim-store-logic.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DynamoClaimTable } from "../../functions/store/dynamo-claim-table.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { DynamoMembershipIndex } from "../../functions/store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../../functions/store/dynamo-mesh-source.ts";
import { DynamoVipItemStore } from "../../functions/store/dynamo-vip-item-store.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { sequentialIds } from "../fixtures/in-memory-ports.ts";
import { inMemoryStores } from "../fixtures/in-memory-stores.ts";
import { meshSourceAnswers, writeSourceData } from "../fixtures/mesh-source-data.ts";
import { type Stores, storeContract } from "../fixtures/store-contract.ts";

let emulator: LocalEmulator;
let client: DynamoDBClient;
let counter = 0;

beforeAll(async () => {
  emulator = await startTestEngine();
  client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
});

afterAll(async () => {
  client?.destroy();
  await emulator?.stop();
});

/** The DynamoDB adapters on fresh tables of the test's engine. */
async function dynamoStores(): Promise<Stores> {
  counter += 1;
  const prefix = `contract-${process.pid}-${counter}`;
  const tables = {
    meshes: `${prefix}-meshes`,
    dataplanes: `${prefix}-dataplanes`,
    externalServices: `${prefix}-external-services`,
    vips: `${prefix}-vips`,
    claims: `${prefix}-claims`,
    index: `${prefix}-index`,
  };
  await createTables(client, tables);
  const doc = new DynamoItemClient(client);
  const put = async (table: string, item: Record<string, unknown>) => {
    await client.send(new PutItemCommand({ TableName: table, Item: toAttributeMap(item) }));
  };
  const claims = new ClaimStoreLogic(
    new DynamoClaimTable(doc, tables.claims),
    sequentialIds("claim"),
  );
  return {
    claims,
    passState: claims,
    vipItems: new DynamoVipItemStore(doc, tables.vips),
    index: new DynamoMembershipIndex(doc, tables.index),
    source: new DynamoMeshSource(client, tables),
    tables: {
      putMesh: (name) => put(tables.meshes, { name }),
      putDataplane: (item) => put(tables.dataplanes, { ...item }),
      putExternalService: (item) => put(tables.externalServices, { ...item }),
    },
  };
}

storeContract("DynamoDB adapters on the local engine", dynamoStores);

describe("the two MeshSource implementations side by side", () => {
  it("answer every method alike over the same data", async () => {
    // Arrange
    const memory = await inMemoryStores();
    const dynamo = await dynamoStores();
    await writeSourceData(memory.tables);
    await writeSourceData(dynamo.tables);

    // Act
    const fromMemory = await meshSourceAnswers(memory.source);
    const fromDynamo = await meshSourceAnswers(dynamo.source);

    // Assert
    expect(fromMemory).toEqual(fromDynamo);
  });
});
