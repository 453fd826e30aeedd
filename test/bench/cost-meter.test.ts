/**
 * The bench's cost meter: item sizes and units by DynamoDB's billing rules (pure), and the
 * middleware on a real client against the local engine, on a sequence whose bill is worked out
 * by hand.
 */
import {
  BatchGetItemCommand,
  DynamoDBClient,
  type DynamoDBClientConfig,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
  TransactWriteItemsCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { itemSize, readUnits, valueSize, writeUnits } from "../../bench/capacity-units.ts";
import { CostMeter } from "../../bench/cost-meter.ts";
import { renderChart } from "../../bench/svg-chart.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";

describe("item sizes and units", () => {
  it("sizes values and items as DynamoDB does", () => {
    expect(valueSize({ S: "héllo" })).toBe(6);
    expect(valueSize({ N: "12345" })).toBe(4);
    expect(valueSize({ BOOL: true })).toBe(1);
    expect(valueSize({ L: [{ S: "ab" }, { NULL: true }] })).toBe(3 + 1 + 2 + 1 + 1);
    expect(valueSize({ M: { k: { S: "v" } } })).toBe(3 + 1 + 1 + 1);
    expect(itemSize({ pk: { S: "abc" }, v: { N: "7" } })).toBe(2 + 3 + 1 + 2);
  });

  it("rounds reads to 4 KB and writes to 1 KB, with a minimum of one unit", () => {
    expect(readUnits(0, true)).toBe(1);
    expect(readUnits(0, false)).toBe(0.5);
    expect(readUnits(4096, true)).toBe(1);
    expect(readUnits(4097, true)).toBe(2);
    expect(writeUnits(0)).toBe(1);
    expect(writeUnits(1024)).toBe(1);
    expect(writeUnits(1025)).toBe(2);
  });
});

describe("the chart", () => {
  it("draws one path per series on log axes and escapes names", () => {
    const svg = renderChart({
      title: "t",
      xLabel: "x",
      yLabel: "y",
      series: [
        {
          name: "a<b",
          points: [
            { x: 100, y: 2 },
            { x: 10_000, y: 3 },
          ],
        },
        {
          name: "c",
          points: [
            { x: 100, y: 20 },
            { x: 10_000, y: 2000 },
          ],
        },
      ],
    });
    expect(svg.match(/<path /g)).toHaveLength(2);
    expect(svg).toContain("a&lt;b");
    const ys = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => Number(m[2]));
    // SVG y grows downwards: the second series rises from 20 to 2,000.
    expect(ys[3] as number).toBeLessThan(ys[2] as number);
  });
});

describe("the meter on the local engine", () => {
  let emulator: LocalEmulator;
  let raw: DynamoDBClient;
  let client: DynamoDBClient;
  let clientConfig: DynamoDBClientConfig;
  const tables = {
    meshes: "cm-meshes",
    dataplanes: "cm-dataplanes",
    vips: "cm-vips",
    claims: "cm-claims",
    index: "cm-index",
  };

  beforeAll(async () => {
    emulator = await startTestEngine();
    const config = {
      endpoint: emulator.endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "test", secretAccessKey: "test" },
    };
    clientConfig = config;
    raw = new DynamoDBClient(config);
    client = new DynamoDBClient(config);
    await createTables(raw, tables);
  });

  afterAll(async () => {
    raw?.destroy();
    client?.destroy();
    await emulator?.stop();
  });

  it("bills a known sequence of requests", async () => {
    // Arrange
    const meter = new CostMeter(raw);
    meter.install(client);
    const big = (name: string, bytes: number) => ({
      mesh: { S: "m" },
      name: { S: name },
      blob: { S: "x".repeat(bytes - 4 - 1 - 4 - name.length - 4) },
    });
    expect(itemSize(big("a", 1536))).toBe(1536);

    // Act
    // 1.5 KB put: 2 write units.
    await client.send(new PutItemCommand({ TableName: tables.dataplanes, Item: big("a", 1536) }));
    // Strongly consistent read of it: 1; of a missing item: 1 (eventually consistent: 0.5).
    await client.send(
      new GetItemCommand({
        TableName: tables.dataplanes,
        Key: { mesh: { S: "m" }, name: { S: "a" } },
        ConsistentRead: true,
      }),
    );
    await client.send(
      new GetItemCommand({
        TableName: tables.dataplanes,
        Key: { mesh: { S: "m" }, name: { S: "zz" } },
      }),
    );
    // Two more 2 KB items: 2 + 2 write units; a Query whose filter returns nothing still
    // reads all three (1.5 + 2 + 2 KB = 5.5 KB): 2 read units.
    await client.send(new PutItemCommand({ TableName: tables.dataplanes, Item: big("b", 2048) }));
    await client.send(new PutItemCommand({ TableName: tables.dataplanes, Item: big("c", 2048) }));
    const query = await client.send(
      new QueryCommand({
        TableName: tables.dataplanes,
        KeyConditionExpression: "mesh = :m",
        FilterExpression: "attribute_exists(nothing)",
        ExpressionAttributeValues: { ":m": { S: "m" } },
        ConsistentRead: true,
      }),
    );
    expect(query.Items).toEqual([]);
    // Three missing keys in one BatchGetItem: 3 read units.
    await client.send(
      new BatchGetItemCommand({
        RequestItems: {
          [tables.claims]: {
            Keys: [{ pk: { S: "addr#1" } }, { pk: { S: "addr#2" } }, { pk: { S: "addr#3" } }],
            ConsistentRead: true,
          },
        },
      }),
    );
    // A failed conditional put over the 2 KB item still bills 2 write units.
    await expect(
      client.send(
        new PutItemCommand({
          TableName: tables.dataplanes,
          Item: big("b", 100),
          ConditionExpression: "attribute_not_exists(mesh)",
        }),
      ),
    ).rejects.toThrow();
    // A transaction of two small puts: 2 x (1 + 1) write units.
    await client.send(
      new TransactWriteItemsCommand({
        TransactItems: [
          { Put: { TableName: tables.claims, Item: { pk: { S: "svc#web" } } } },
          { Put: { TableName: tables.claims, Item: { pk: { S: "addr#9" } } } },
        ],
      }),
    );

    // Assert
    const totals = meter.snapshot();
    expect(totals.requests).toBe(9);
    expect(totals.writeUnits).toBe(2 + 2 + 2 + 2 + 4);
    expect(totals.readUnits).toBe(1 + 0.5 + 2 + 3);
    expect(totals.byKeyPrefix.get(`${tables.claims} addr`)).toEqual({
      requests: 0,
      readUnits: 3,
      writeUnits: 2,
    });
    expect(totals.byOperation.get("PutItemCommand")).toBe(4);
  });

  it("adds the write of the versions index to a VIP item write that changes its version", async () => {
    // Arrange: a 2 KB VIP item; its index entry holds mesh, version and incarnation (< 1 KB).
    const meter = new CostMeter(raw);
    const metered = new DynamoDBClient(clientConfig);
    meter.install(metered);
    const item = (version: string, incarnation: string) => ({
      mesh: { S: "m" },
      version: { N: version },
      incarnation: { S: incarnation },
      vips: { S: "x".repeat(2000) },
    });

    // Act
    await metered.send(new PutItemCommand({ TableName: tables.vips, Item: item("1", "i") }));
    const created = meter.snapshot().writeUnits;
    await metered.send(new PutItemCommand({ TableName: tables.vips, Item: item("1", "i") }));
    const unchanged = meter.snapshot().writeUnits - created;
    await metered.send(new PutItemCommand({ TableName: tables.vips, Item: item("2", "i") }));
    const moved = meter.snapshot().writeUnits - created - unchanged;
    metered.destroy();
    const scanned = await client.send(
      new ScanCommand({ TableName: tables.vips, IndexName: "versions" }),
    );

    // Assert: 2 (item) + 1 (index); 2 + 0 (the index entry is the same); 2 + 1.
    expect([created, unchanged, moved]).toEqual([3, 2, 3]);
    expect(scanned.Items).toEqual([
      { mesh: { S: "m" }, version: { N: "2" }, incarnation: { S: "i" } },
    ]);
  });
});
