import { createSocket } from "node:dgram";
import { Resolver } from "node:dns/promises";
import { connect } from "node:net";
import { Readable } from "node:stream";
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  UpdateTableCommand,
} from "@aws-sdk/client-dynamodb";
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record as StreamRecord,
} from "@aws-sdk/client-dynamodb-streams";
import dnsPacket from "dns-packet";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordOf } from "../../functions/domain/records.ts";
import {
  DnsResponder,
  diffStreamRecord,
  type MalformedItem,
  NameTable,
  type ProbeFallback,
  type SnapshotDiff,
  VipReader,
  VipReaderError,
} from "../../functions/reader/index.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import { encodeVipItem } from "../../functions/store/vip-item-codec.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { seededRandom as random } from "../fixtures/in-memory-ports.ts";
import { createWorld, dataplane, startEmulator, type World } from "./harness.ts";

let emulator: LocalEmulator;

beforeAll(async () => {
  emulator = await startEmulator();
});

afterAll(async () => {
  await emulator?.stop();
});

interface Call {
  readonly command: string;
  readonly input: Record<string, unknown>;
}

/** A client of its own whose every request is recorded (command and input). */
function recordingClient(): { client: DynamoDBClient; calls: Call[] } {
  const client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  const calls: Call[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      calls.push({
        command: context.commandName ?? "?",
        input: args.input as Record<string, unknown>,
      });
      return await next(args);
    },
    { step: "initialize", name: "recordCalls" },
  );
  return { client, calls };
}

const commands = (calls: readonly Call[]) => calls.map((call) => call.command);

/**
 * A recording client for a caller whose IAM policy allows the vips table but not its
 * `versions` index (a grant on `VipsTableArn` only). The local engine does not enforce IAM, so
 * a request naming the index gets, instead of being sent, the HTTP response DynamoDB sends for
 * it (400, `AccessDeniedException`), which the SDK's own deserializer turns into the error.
 * Everything else reaches the engine.
 */
function indexDeniedClient(): { client: DynamoDBClient; calls: Call[]; denied: Call[] } {
  const { client, calls } = recordingClient();
  const denied: Call[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as Record<string, unknown>;
      if (input.IndexName === undefined) return await next(args);
      denied.push({ command: context.commandName ?? "?", input });
      const action = String(context.commandName).replace(/Command$/, "");
      const body = JSON.stringify({
        __type: "com.amazon.coral.service#AccessDeniedException",
        Message:
          "User: arn:aws:sts::210987654321:assumed-role/dns/task is not authorized to perform: " +
          `dynamodb:${action} on resource: arn:aws:dynamodb:us-east-1:123456789012:table/` +
          `${String(input.TableName)}/index/${String(input.IndexName)} because no ` +
          `resource-based policy allows the dynamodb:${action} action`,
      });
      return {
        // The shape of the SDK's HttpResponse (statusCode, headers, a body stream).
        response: {
          statusCode: 400,
          reason: "Bad Request",
          headers: { "content-type": "application/x-amz-json-1.0" },
          body: Readable.from([Buffer.from(body)]),
        },
      } as Awaited<ReturnType<typeof next>>;
    },
    // Inside the deserializer (low priority in its step), before anything is sent.
    { step: "deserialize", name: "denyVersionsIndex", priority: "low" },
  );
  return { client, calls, denied };
}

function bigItem(mesh: string, services: number, version: number) {
  const vips: [string, string][] = [];
  for (let i = 0; i < services; i++) {
    vips.push([`svc-${i}_ns_svc_8080`, `240.1.${i >> 8}.${i & 255}`]);
  }
  return encodeVipItem({
    mesh,
    version,
    vips: recordOf(vips),
    cidr: "240.0.0.0/4",
    updatedAt: new Date(version * 1000).toISOString(),
    incarnation: `inc-${mesh}`,
  }).stored;
}

describe("VipReader on the local engine", () => {
  let world: World;

  beforeAll(async () => {
    world = await createWorld(emulator);
  });

  afterAll(() => world?.close());

  it("follows allocations, releases and a format-2 mesh; while nothing changes the probe is its only read", async () => {
    const { client, calls } = recordingClient();
    const reader = new VipReader({ client, table: world.tables.vips });
    await world.putMesh("default");
    await world.putMesh("payments");
    await world.putDataplane(dataplane("default", "web-1", ["web"]));
    await world.putDataplane(dataplane("default", "auth-1", ["auth"]));
    await world.putDataplane(dataplane("payments", "auth-2", ["auth"]));
    await world.drain();

    expect(reader.ready).toBe(false);
    const first = await reader.refresh();
    expect(first.meshesAdded).toEqual(["default", "payments"]);
    expect(reader.meshes()).toEqual(["default", "payments"]);
    const auth = reader.lookup("auth");
    expect(auth?.meshes).toEqual(["default", "payments"]);
    const web = reader.lookup("web")?.vip as string;
    expect(reader.get("default")?.vips.get("web")).toBe(web);
    expect(reader.reverse(web)).toMatchObject({ service: "web", meshes: ["default"] });

    // A release: the dataplane goes, the service leaves the mesh.
    await world.deleteDataplane("default", "web-1");
    await world.drain();
    const released = await reader.refresh();
    expect(released.meshes).toEqual([
      expect.objectContaining({
        mesh: "default",
        change: "changed",
        removed: [{ service: "web", vip: web }],
        added: [],
      }),
    ]);
    expect(reader.lookup("web")).toBeUndefined();
    expect(reader.reverse(web)).toBeUndefined();

    // A mesh of 2,000 services, stored in format 2 (gzip).
    const stored = bigItem("big", 3000, 1);
    expect(stored.format).toBe(2);
    const doc = new DynamoItemClient(world.client);
    await doc.put({ TableName: world.tables.vips, Item: stored });
    const big = await reader.refresh();
    expect(big.meshesAdded).toEqual(["big"]);
    expect(reader.get("big")?.vips.size).toBe(3000);
    expect(reader.lookup("svc-2999_ns_svc_8080")).toMatchObject({ vip: "240.1.11.183" });

    // Nothing changes: every request is the probe, a Scan of the versions index.
    calls.length = 0;
    const quiet: SnapshotDiff[] = [];
    for (let i = 0; i < 3; i++) quiet.push(await reader.refresh());
    expect(quiet.every((diff) => diff.meshes.length === 0)).toBe(true);
    expect(commands(calls)).toEqual(["ScanCommand", "ScanCommand", "ScanCommand"]);
    for (const call of calls) {
      expect(call.input).toMatchObject({
        IndexName: "versions",
        ProjectionExpression: "#m, #v, #i",
        ExpressionAttributeNames: { "#m": "mesh", "#v": "version", "#i": "incarnation" },
      });
      expect(call.input).not.toHaveProperty("ConsistentRead");
    }
    expect(reader.lastRefresh).toEqual({ probeRequests: 1, fetches: 0, meshes: 3 });

    // One mesh moves: the probe, then that mesh's item only.
    calls.length = 0;
    await doc.put({ TableName: world.tables.vips, Item: bigItem("big", 2999, 2) });
    const moved = await reader.refresh();
    expect(commands(calls)).toEqual(["ScanCommand", "GetItemCommand"]);
    expect(calls[1]?.input).toMatchObject({ Key: { mesh: { S: "big" } }, ConsistentRead: false });
    expect(moved.meshes).toEqual([
      expect.objectContaining({
        mesh: "big",
        version: 2,
        previousVersion: 1,
        removed: [{ service: "svc-2999_ns_svc_8080", vip: "240.1.11.183" }],
      }),
    ]);

    // The item goes: the mesh is removed.
    await doc.delete({ TableName: world.tables.vips, Key: { mesh: "big" } });
    expect((await reader.refresh()).meshesRemoved).toEqual(["big"]);
    client.destroy();
  });

  it("reads strongly consistent on request, and probes listed meshes with a GetItem each", async () => {
    const { client, calls } = recordingClient();
    const reader = new VipReader({
      client,
      table: world.tables.vips,
      consistentRead: true,
      meshes: ["payments", "nowhere"],
    });
    await reader.refresh();
    expect(reader.meshes()).toEqual(["payments"]);
    expect(commands(calls)).toEqual(["GetItemCommand", "GetItemCommand", "GetItemCommand"]);
    expect(calls.slice(0, 2).map((call) => call.input.ProjectionExpression)).toEqual([
      "#m, #v, #i",
      "#m, #v, #i",
    ]);
    expect(calls[2]?.input.ProjectionExpression).toBeUndefined();
    expect(calls.every((call) => call.input.ConsistentRead === true)).toBe(true);
    calls.length = 0;
    await reader.refresh();
    expect(commands(calls)).toEqual(["GetItemCommand", "GetItemCommand"]);
    client.destroy();
  });

  it("probes listed meshes with a Query of the versions index each, eventually consistent", async () => {
    const { client, calls } = recordingClient();
    const reader = new VipReader({
      client,
      table: world.tables.vips,
      meshes: ["payments", "nowhere"],
    });
    await reader.refresh();
    calls.length = 0;
    await reader.refresh();
    expect(reader.meshes()).toEqual(["payments"]);
    expect(commands(calls)).toEqual(["QueryCommand", "QueryCommand"]);
    expect(calls.every((call) => call.input.IndexName === "versions")).toBe(true);
    client.destroy();
  });

  it("probes the table itself when it was created without the versions index", async () => {
    // Arrange: a vips table as older versions created it, with one item.
    const table = `${world.tables.vips}-noindex`;
    await world.client.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [{ AttributeName: "mesh", AttributeType: "S" }],
        KeySchema: [{ AttributeName: "mesh", KeyType: "HASH" }],
      }),
    );
    const copy = await world.vipItem("payments");
    if (copy === undefined) throw new Error("payments has no item");
    const doc = new DynamoItemClient(world.client);
    await doc.put({ TableName: table, Item: encodeVipItem(copy).stored });
    const { client, calls } = recordingClient();
    const reader = new VipReader({ client, table });

    // Act
    await reader.refresh();
    calls.length = 0;
    await reader.refresh();

    // Assert
    expect(reader.get("payments")?.version).toBe(copy?.version);
    expect(commands(calls)).toEqual(["ScanCommand"]);
    expect(calls[0]?.input.IndexName).toBeUndefined();
    client.destroy();
  });

  it("falls back to probing the table when the caller may not read the versions index, and says so once", async () => {
    // Arrange: a caller allowed the table (GetItem, Scan) but not the index.
    const { client, calls, denied } = indexDeniedClient();
    const fallbacks: ProbeFallback[] = [];
    const reader = new VipReader({
      client,
      table: world.tables.vips,
      onProbeFallback: (fallback) => fallbacks.push(fallback),
    });
    const listed = indexDeniedClient();
    const listedFallbacks: ProbeFallback[] = [];
    const listedReader = new VipReader({
      client: listed.client,
      table: world.tables.vips,
      meshes: ["payments", "default"],
      onProbeFallback: (fallback) => listedFallbacks.push(fallback),
    });
    const expected = await world.vipItem("payments");

    // Act
    await reader.refresh();
    await listedReader.refresh();
    calls.length = 0;
    listed.calls.length = 0;
    await reader.refresh();
    await listedReader.refresh();

    // Assert: the same snapshot as through the index; after the first denial the index is
    // never asked again, and the fallback is reported once.
    expect(reader.get("payments")?.version).toBe(expected?.version);
    expect(reader.meshes()).toEqual(expect.arrayContaining(["payments", "default"]));
    expect(listedReader.meshes()).toEqual(["default", "payments"]);
    expect(denied.map((call) => call.command)).toEqual(["ScanCommand"]);
    expect(commands(calls)).toEqual(["ScanCommand"]);
    expect(calls[0]?.input.IndexName).toBeUndefined();
    expect(fallbacks).toHaveLength(1);
    expect(fallbacks[0]).toMatchObject({
      table: world.tables.vips,
      index: "versions",
      reason: "access-denied",
    });
    expect(fallbacks[0]?.error).toMatch(/^AccessDeniedException: User: .*index\/versions/);
    expect(listed.denied.every((call) => call.command === "QueryCommand")).toBe(true);
    expect(listed.denied.length).toBeGreaterThanOrEqual(1);
    expect(commands(listed.calls)).toEqual(["GetItemCommand", "GetItemCommand"]);
    expect(listedFallbacks).toHaveLength(1);
    client.destroy();
    listed.client.destroy();
  });

  it("surfaces AccessDenied when the caller may read neither the index nor the table", async () => {
    const { client } = indexDeniedClient();
    client.middlewareStack.add(
      () => async () => {
        throw Object.assign(new Error("not authorized to perform: dynamodb:Scan"), {
          name: "AccessDeniedException",
        });
      },
      { step: "initialize", name: "denyEverything", priority: "low" },
    );
    const reader = new VipReader({
      client,
      table: world.tables.vips,
      onProbeFallback: () => undefined,
    });
    const error = await reader.refresh().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(VipReaderError);
    expect((error as VipReaderError).code).toBe("ACCESS_DENIED");
    expect(reader.ready).toBe(false);
    client.destroy();
  });

  it("reports a malformed item once, skips it, keeps the mesh's last good view, and never refetches it unchanged", async () => {
    const own = await createWorld(emulator);
    const { client, calls } = recordingClient();
    const reported: MalformedItem[] = [];
    const reader = new VipReader({
      client,
      table: own.tables.vips,
      onMalformed: (item) => reported.push(item),
    });
    const doc = new DynamoItemClient(own.client);
    const good = bigItem("shop", 3, 1);
    await doc.put({ TableName: own.tables.vips, Item: good });
    await doc.put({
      TableName: own.tables.vips,
      Item: { mesh: "junk", version: 1, format: 2, vipsGz: Buffer.from("not gzip") },
    });
    await doc.put({ TableName: own.tables.vips, Item: { mesh: "odd", version: "seven" } });
    await reader.refresh();
    expect(reader.meshes()).toEqual(["shop"]);
    expect(reported.map((r) => [r.mesh, r.reason.split(":")[0]])).toEqual(
      expect.arrayContaining([
        ["junk", "cannot decode the item"],
        ["odd", 'version "seven" is not valid'],
      ]),
    );
    expect(reported).toHaveLength(2);

    // The good mesh turns bad: reported, and the last good view stays.
    await doc.put({
      TableName: own.tables.vips,
      Item: { ...good, version: 2, format: 2, vipsGz: Buffer.from("broken") },
    });
    await reader.refresh();
    expect(reported).toHaveLength(3);
    expect(reader.get("shop")?.version).toBe(1);
    calls.length = 0;
    await reader.refresh();
    await reader.refresh();
    expect(commands(calls)).toEqual(["ScanCommand", "ScanCommand"]);
    expect(reported).toHaveLength(3);
    own.close();
    client.destroy();
  });

  it("surfaces DynamoDB errors as a VipReaderError with a code, keeping the snapshot", async () => {
    const { client } = recordingClient();
    const reader = new VipReader({ client, table: "no-such-vips-table" });
    const error = await reader.refresh().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VipReaderError);
    expect(error).toMatchObject({ code: "TABLE_NOT_FOUND", retryable: false });
    expect((error as Error).message).toContain("no-such-vips-table");
    expect(reader.ready).toBe(false);
    expect(reader.meshes()).toEqual([]);
    client.destroy();
  });

  it("watch calls back with what changed; a failing callback is reported and watching goes on", async () => {
    const { client } = recordingClient();
    const reader = new VipReader({ client, table: world.tables.vips });
    await reader.refresh();
    const seen: SnapshotDiff[] = [];
    const errors: VipReaderError[] = [];
    const handle = reader.watch(
      (diff) => {
        seen.push(diff);
        if (seen.length === 1) throw new Error("listener broke");
      },
      { intervalMs: 50, immediate: false, onError: (error) => void errors.push(error) },
    );
    const until = async (count: number): Promise<void> => {
      const deadline = Date.now() + 30_000;
      while (seen.length < count && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    try {
      await world.putDataplane(dataplane("payments", "cart-1", ["cart"]));
      await world.drain();
      await until(1);
      await world.deleteDataplane("payments", "cart-1");
      await world.drain();
      await until(2);
    } finally {
      await handle.stop();
    }
    expect(errors.map((error) => [error.code, error.message])).toEqual([
      ["LISTENER_ERROR", "watch callback failed: listener broke"],
    ]);
    expect(seen.map((diff) => diff.meshes)).toEqual([
      [
        expect.objectContaining({
          mesh: "payments",
          added: [expect.objectContaining({ service: "cart" })],
        }),
      ],
      [
        expect.objectContaining({
          mesh: "payments",
          removed: [expect.objectContaining({ service: "cart" })],
        }),
      ],
    ]);
    client.destroy();
  });
});

/** Every record of a table's stream so far, from the start (moto: one shard per table). */
async function streamRecords(client: DynamoDBClient, table: string): Promise<StreamRecord[]> {
  const described = await client.send(new DescribeTableCommand({ TableName: table }));
  const StreamArn = described.Table?.LatestStreamArn as string;
  const streams = new DynamoDBStreamsClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  try {
    const stream = await streams.send(new DescribeStreamCommand({ StreamArn }));
    const records: StreamRecord[] = [];
    for (const shard of stream.StreamDescription?.Shards ?? []) {
      let iterator = (
        await streams.send(
          new GetShardIteratorCommand({
            StreamArn,
            ShardId: shard.ShardId as string,
            ShardIteratorType: "TRIM_HORIZON",
          }),
        )
      ).ShardIterator;
      while (iterator !== undefined) {
        const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
        records.push(...(page.Records ?? []));
        if ((page.Records ?? []).length === 0) break;
        iterator = page.NextShardIterator;
      }
    }
    return records;
  } finally {
    streams.destroy();
  }
}

describe("the change feed on the local engine", () => {
  it("diffs the records of a vips stream written by the allocator, and of a format-2 item", async () => {
    const own = await createWorld(emulator);
    try {
      // What `vipsStream: true` does to the table in AWS.
      await own.client.send(
        new UpdateTableCommand({
          TableName: own.tables.vips,
          StreamSpecification: { StreamEnabled: true, StreamViewType: "NEW_AND_OLD_IMAGES" },
        }),
      );
      await own.putMesh("shop");
      await own.putDataplane(dataplane("shop", "web-1", ["web", "constructor"]));
      await own.drain();
      await own.deleteDataplane("shop", "web-1");
      await own.drain();
      const doc = new DynamoItemClient(own.client);
      await doc.put({ TableName: own.tables.vips, Item: bigItem("big", 3000, 1) });
      await doc.put({ TableName: own.tables.vips, Item: bigItem("big", 2999, 2) });
      await doc.delete({ TableName: own.tables.vips, Key: { mesh: "big" } });

      const records = await streamRecords(own.client, own.tables.vips);
      const diffs = records
        .map((record) => diffStreamRecord(record))
        .filter((d) => d !== undefined);

      const shop = diffs.filter((d) => d.mesh === "shop");
      const added = shop.flatMap((d) => d.added.map((e) => e.service)).sort();
      const removed = shop.flatMap((d) => d.removed.map((e) => e.service)).sort();
      expect(added).toEqual(["constructor", "web"]);
      expect(removed).toEqual(["constructor", "web"]);
      const big = diffs.filter((d) => d.mesh === "big");
      expect(big.map((d) => [d.change, d.added.length, d.removed.length])).toEqual([
        ["added", 3000, 0],
        ["changed", 0, 1],
        ["removed", 0, 2999],
      ]);
      expect(big[1]?.removed).toEqual([{ service: "svc-2999_ns_svc_8080", vip: "240.1.11.183" }]);
    } finally {
      own.close();
    }
  });
});

const TCP_QUERY_ID = 0xbeef;

/**
 * One query over TCP (length-prefixed, RFC 1035 4.2.2, framed with dns-packet's streamEncode),
 * after `prefix` (raw bytes) on the same connection; resolves with the answer to the query
 * (answers to whatever `prefix` held are skipped).
 */
function askTcp(port: number, name: string, type: dnsPacket.RecordType, prefix?: Buffer) {
  return new Promise<dnsPacket.DecodedPacket & { rcode?: string }>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let buffer = Buffer.alloc(0);
    socket.on("error", reject);
    socket.on("close", () => reject(new Error("connection closed before the answer")));
    socket.on("data", (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      while (buffer.length >= 2 && buffer.length >= 2 + buffer.readUInt16BE(0)) {
        const frame = buffer.subarray(0, 2 + buffer.readUInt16BE(0));
        buffer = buffer.subarray(frame.length);
        let reply: (dnsPacket.DecodedPacket & { rcode?: string }) | undefined;
        try {
          reply = dnsPacket.streamDecode(frame) as dnsPacket.DecodedPacket & { rcode?: string };
        } catch {
          continue; // a header-only FORMERR to a garbage frame
        }
        if (reply.id === TCP_QUERY_ID && reply.questions?.[0]?.name === name) {
          socket.end();
          resolve(reply);
        }
      }
    });
    socket.on("connect", () => {
      if (prefix !== undefined) socket.write(prefix);
      socket.write(
        dnsPacket.streamEncode({
          type: "query",
          id: TCP_QUERY_ID,
          flags: dnsPacket.RECURSION_DESIRED,
          questions: [{ type, name, class: "IN" }],
        }),
      );
    });
  });
}

describe("the DNS responder, fed by a VipReader on the local engine", () => {
  let world: World;
  let reader: VipReader;
  let responder: DnsResponder;
  let port: number;
  let client: DynamoDBClient;
  const resolver = new Resolver({ timeout: 3000, tries: 3 });

  beforeAll(async () => {
    world = await createWorld(emulator);
    await world.putMesh("default");
    await world.putDataplane(
      dataplane("default", "pods", [
        "web",
        "backend_kuma-demo_svc_8080",
        "constructor",
        "__proto__",
      ]),
    );
    await world.drain();
    client = recordingClient().client;
    reader = new VipReader({ client, table: world.tables.vips });
    await reader.refresh();
    responder = new DnsResponder({
      ttl: 30,
      table: new NameTable(reader.snapshot, { domain: "mesh" }),
    });
    port = (await responder.start()).port;
    resolver.setServers([`127.0.0.1:${port}`]);
  });

  afterAll(async () => {
    await responder?.stop();
    client?.destroy();
    world?.close();
  });

  it("answers A, the Kuma variant, names as data, PTR, NXDOMAIN, NODATA and REFUSED over UDP", async () => {
    const web = reader.lookup("web")?.vip as string;
    expect(await resolver.resolve4("web.mesh", { ttl: true })).toEqual([{ address: web, ttl: 30 }]);
    expect(await resolver.resolve4("WEB.Mesh")).toEqual([web]);
    const backend = reader.lookup("backend_kuma-demo_svc_8080")?.vip;
    expect(await resolver.resolve4("backend.kuma-demo.svc.8080.mesh")).toEqual([backend]);
    expect(await resolver.resolve4("backend_kuma-demo_svc_8080.mesh")).toEqual([backend]);
    expect(await resolver.resolve4("constructor.mesh")).toEqual([
      reader.lookup("constructor")?.vip,
    ]);
    expect(await resolver.resolve4("__proto__.mesh")).toEqual([reader.lookup("__proto__")?.vip]);
    expect(await resolver.reverse(web)).toEqual(["web.mesh"]);
    await expect(resolver.resolve4("nothing.mesh")).rejects.toMatchObject({ code: "ENOTFOUND" });
    await expect(resolver.resolve6("web.mesh")).rejects.toMatchObject({ code: "ENODATA" });
    await expect(resolver.resolve4("example.com")).rejects.toMatchObject({ code: "EREFUSED" });
  });

  it("answers over TCP", async () => {
    const reply = await askTcp(port, "web.mesh", "A");
    expect(reply).toMatchObject({ id: TCP_QUERY_ID, type: "response", rcode: "NOERROR" });
    expect(reply.answers?.[0]).toMatchObject({ name: "web.mesh", data: reader.lookup("web")?.vip });
    expect((await askTcp(port, "nothing.mesh", "A")).rcode).toBe("NXDOMAIN");
  });

  it("keeps answering after 1,000 random malformed packets (seeded) over UDP and TCP", async () => {
    const next = random(1203);
    const valid = dnsPacket.encode({
      type: "query",
      id: 1,
      questions: [{ type: "A", name: "web.mesh", class: "IN" }],
    });
    const packets: Buffer[] = [];
    for (let i = 0; i < 1000; i++) {
      packets.push(
        i % 2 === 0
          ? Buffer.from(
              Array.from({ length: 1 + Math.floor(next() * 100) }, () => Math.floor(next() * 256)),
            )
          : Buffer.from(valid.map((byte) => (next() < 0.15 ? Math.floor(next() * 256) : byte))),
      );
    }
    const udp = createSocket("udp4");
    await new Promise<void>((resolve) => udp.bind(0, "127.0.0.1", resolve));
    // One at a time, each until the responder has taken it (answered or dropped): a burst would
    // overflow the socket's receive buffer, and lost datagrams would prove nothing.
    const handled = () => responder.counts.udp + responder.counts.dropped;
    for (const packet of packets) {
      const before = handled();
      await new Promise<void>((resolve) => udp.send(packet, port, "127.0.0.1", () => resolve()));
      const deadline = Date.now() + 10_000;
      while (handled() === before && Date.now() < deadline) {
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    udp.close();
    // Over TCP: a burst of garbage frames on one connection, then a well-formed query on another.
    const garbage = Buffer.concat(
      packets.slice(0, 50).map((packet) => {
        const length = Buffer.alloc(2);
        length.writeUInt16BE(packet.length);
        return Buffer.concat([length, packet]);
      }),
    );
    const afterGarbage = await askTcp(port, "web.mesh", "A", garbage);
    expect(afterGarbage.answers?.[0]).toMatchObject({ data: reader.lookup("web")?.vip });
    expect(await resolver.resolve4("web.mesh")).toEqual([reader.lookup("web")?.vip]);
    expect((await askTcp(port, "web.mesh", "A")).rcode).toBe("NOERROR");
    expect(handled()).toBeGreaterThanOrEqual(1000);
  });

  it("serves AAAA and PTR for a mesh with an IPv6 VIP_CIDR", async () => {
    const six = await createWorld(emulator, { VIP_CIDR: "fd00:10::/64" });
    const sixClient = recordingClient().client;
    try {
      await six.putMesh("v6");
      await six.putDataplane(dataplane("v6", "api-1", ["api"]));
      await six.drain();
      const sixReader = new VipReader({ client: sixClient, table: six.tables.vips });
      await sixReader.refresh();
      const vip = sixReader.lookup("api")?.vip as string;
      expect(vip).toMatch(/^fd00:10::/);
      const sixResponder = new DnsResponder({
        ttl: 30,
        table: new NameTable(sixReader.snapshot, { domain: "mesh" }),
      });
      const sixPort = (await sixResponder.start()).port;
      try {
        const sixResolver = new Resolver({ timeout: 3000, tries: 3 });
        sixResolver.setServers([`127.0.0.1:${sixPort}`]);
        expect(await sixResolver.resolve6("api.mesh")).toEqual([vip]);
        expect(await sixResolver.reverse(vip)).toEqual(["api.mesh"]);
        await expect(sixResolver.resolve4("api.mesh")).rejects.toMatchObject({ code: "ENODATA" });
        const tcp = await askTcp(sixPort, "api.mesh", "AAAA");
        expect(tcp.answers?.[0]).toMatchObject({ type: "AAAA", data: vip });
      } finally {
        await sixResponder.stop();
      }
    } finally {
      sixClient.destroy();
      six.close();
    }
  });
});
