import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, GetCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { VipItem } from "../../functions/domain/types.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { DynamoVipItemStore } from "../../functions/store/dynamo-vip-item-store.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";

let emulator: LocalEmulator;
let client: DynamoDBClient;
let doc: DynamoDBDocumentClient;
let store: DynamoVipItemStore;
const TABLES = {
  meshes: "s-meshes",
  dataplanes: "s-dataplanes",
  vips: "s-vips",
  claims: "s-claims",
  index: "s-index",
};

beforeAll(async () => {
  emulator = await startTestEngine();
  client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  doc = DynamoDBDocumentClient.from(client);
  await createTables(client, TABLES);
  store = new DynamoVipItemStore(new DynamoItemClient(client), TABLES.vips);
});

afterAll(async () => {
  client?.destroy();
  await emulator?.stop();
});

function item(mesh: string, version: number, services = 2): VipItem {
  const vips: Record<string, string> = {};
  for (let i = 0; i < services; i++) {
    vips[`svc-${i}_ns-${i % 40}_svc_${8000 + (i % 100)}`] =
      `240.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
  }
  return {
    mesh,
    version,
    vips,
    cidr: "240.0.0.0/4",
    updatedAt: new Date(0).toISOString(),
    incarnation: "i",
  };
}

describe("DynamoVipItemStore on the local engine", () => {
  it("creates only when absent and updates only from the version read", async () => {
    await store.put(item("m", 1), undefined);

    expect(await store.put(item("m", 1), undefined)).toEqual({
      written: false,
      found: item("m", 1),
    });
    expect(await store.put(item("m", 3), item("m", 2))).toEqual({
      written: false,
      found: item("m", 1),
    });
    expect((await store.put(item("m", 2, 3), item("m", 1))).written).toBe(true);
    expect((await store.get("m"))?.version).toBe(2);
    expect(await store.delete("m", item("m", 1))).toEqual({
      written: false,
      found: item("m", 2, 3),
    });
    expect(await store.delete("m", item("m", 2))).toEqual({ written: true, bytes: 0 });
    expect(await store.get("m")).toBeUndefined();
  });

  it("answers a lost condition with unknown when it does not ask for the item", async () => {
    const plain = new DynamoVipItemStore(
      new DynamoItemClient(client, { returnOnConditionFailure: false }),
      TABLES.vips,
    );
    await plain.put(item("asked", 1), undefined);

    expect(await plain.put(item("asked", 2), item("asked", 5))).toEqual({
      written: false,
      found: "unknown",
    });
    expect(await store.put(item("asked", 2), item("asked", 5))).toEqual({
      written: false,
      found: item("asked", 1),
    });
  });

  it("stores a mesh of 20,000 services in one item and reads it back", async () => {
    const big = item("big", 1, 20_000);

    const write = await store.put(big, undefined);

    expect(write.written ? write.bytes : Number.NaN).toBeLessThan(400 * 1024);
    expect(await store.get("big")).toEqual(big);
    const raw = await doc.send(new GetCommand({ TableName: TABLES.vips, Key: { mesh: "big" } }));
    expect(raw.Item?.format).toBe(2);
  });
});
