/**
 * The orderings of test/unit/event-path-state.test.ts on the local engine, through the real
 * stream handler and the DynamoDB adapters: each fault is injected by a middleware of the
 * handler's SDK client (a throttle that outlasts the SDK's retries is thrown before the retry
 * loop; a delay holds one request until the test lets it go). The state that decides whether a
 * pass runs (pending pairs, the waiting list, the range records) and the memberships a failed
 * pass leaves must come out right without the repair sweep.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { DynamoDBRecord } from "aws-lambda";
import { describe, expect, it } from "vitest";
import {
  createDynamoClient,
  createRuntime,
  dynamoPorts,
} from "../../functions/allocator/runtime.ts";
import { sweep } from "../../functions/allocator/sweep/sweep.ts";
import type { ServiceClaim } from "../../functions/store/ports.ts";
import {
  type DataplaneItem,
  dataplaneRecord,
  ingress,
  meshItem,
  meshRecord,
} from "../fixtures/builders.ts";
import { InMemoryTelemetry } from "../fixtures/in-memory-ports.ts";
import { leakViolations } from "../fixtures/invariants.ts";
import { dataplane, expectInvariants, type World, worldsOnTheEngine } from "./harness.ts";

const world = worldsOnTheEngine();
const CREDENTIALS = { accessKeyId: "test", secretAccessKey: "test" };

/** Which requests a fault applies to: the command and its input. */
type Match = (command: string, input: Record<string, unknown>) => boolean;

/** While `armed()`, every matching request fails as DynamoDB's throttle after the SDK's retries. */
function throttle(client: DynamoDBClient, armed: () => boolean, match: Match): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (armed() && match(String(context.commandName), args.input as Record<string, unknown>)) {
        throw Object.assign(
          new Error("injected: Rate of requests exceeds the allowed throughput"),
          {
            name: "ProvisionedThroughputExceededException",
            $metadata: { httpStatusCode: 400 },
          },
        );
      }
      return await next(args);
    },
    { step: "initialize", name: "injectThrottle" },
  );
}

/** Holds the first matching request once armed; `reached` resolves when it waits. */
function holdOnce(client: DynamoDBClient, match: Match) {
  let armed = false;
  let reached = (): void => {};
  let release = (): void => {};
  const atHold = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const go = new Promise<void>((resolve) => {
    release = resolve;
  });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (armed && match(String(context.commandName), args.input as Record<string, unknown>)) {
        armed = false;
        reached();
        await go;
      }
      return await next(args);
    },
    { step: "initialize", name: "holdOnce" },
  );
  return {
    arm: () => {
      armed = true;
    },
    reached: atHold,
    release,
  };
}

/** Changes the tables and returns the stream records they produce. */
function records(w: World) {
  return {
    async mesh(name: string): Promise<DynamoDBRecord> {
      await w.putMesh(name);
      return meshRecord(w.tables.meshes, name, { newImage: meshItem(name) });
    },
    async put(item: DataplaneItem, old?: DataplaneItem): Promise<DynamoDBRecord> {
      await w.putDataplane(item);
      return dataplaneRecord(w.tables.dataplanes, {
        newImage: item,
        ...(old !== undefined ? { oldImage: old } : {}),
      });
    },
    async remove(item: DataplaneItem): Promise<DynamoDBRecord> {
      await w.deleteDataplane(item.mesh, item.name);
      return dataplaneRecord(w.tables.dataplanes, { oldImage: item });
    },
  };
}

async function claimsOf(w: World): Promise<ServiceClaim[]> {
  const { claims } = dynamoPorts(w.config, w.client);
  const out: ServiceClaim[] = [];
  let after: string | undefined;
  do {
    const page = await claims.scan(after, 100);
    for (const item of page.items) if ("service" in item) out.push(item.service);
    after = page.next;
  } while (after !== undefined);
  return out;
}

async function expectNoLeaks(w: World): Promise<void> {
  expect(leakViolations(await w.allVipItems(), await claimsOf(w))).toEqual([]);
}

/** The `pk` of a key or item as the SDK client sends it (an attribute value). */
function keyOf(value: unknown): unknown {
  return (value as { pk?: { S?: unknown } } | undefined)?.pk?.S;
}

const isIndexRecordPut =
  (w: () => World | undefined): Match =>
  (command, input) =>
    command === "PutItemCommand" && input.TableName === w()?.tables.index;

const isItemWrite =
  (w: () => World | undefined): Match =>
  (command, input) =>
    command === "PutItemCommand" && input.TableName === w()?.tables.vips;

/** A world whose handler's requests that `matching` picks are throttled while `fault.armed`. */
async function throttledWorld(matching: (w: () => World | undefined) => Match) {
  let current: World | undefined;
  const fault = { armed: false };
  const w = await world(
    {},
    {
      handlerClient: (client) =>
        throttle(
          client,
          () => fault.armed,
          matching(() => current),
        ),
    },
  );
  current = w;
  return { w, fault };
}

describe("the event path without the sweep on the local engine, round 2", () => {
  it("1. passes a mesh whose lowest contributor's record write was throttled after its entries, when the retry removes it again", async () => {
    // Arrange: M lists web; the ingress (lowest id of M) starts advertising s, and its index
    // record write is throttled
    const { w, fault } = await throttledWorld(isIndexRecordPut);
    const r = records(w);
    await w.invoke({ Records: [await r.mesh("M"), await r.put(dataplane("M", "web-1", ["web"]))] });
    const advertising = ingress("M", "a-ingress", [{ mesh: "M", service: "s" }]);
    const starts = await r.put(advertising);
    fault.armed = true;
    const failed = await w.invoke({ Records: [starts] });
    fault.armed = false;
    expect(failed.batchItemFailures).toHaveLength(1);

    // Act: another dataplane adds s (and skips); the ingress stops; the retry holds both
    await w.invoke({ Records: [await r.put(dataplane("M", "s-1", ["s"]))] });
    const stops = await r.put(ingress("M", "a-ingress", []), advertising);
    await w.invoke({ Records: [starts, stops] });

    // Assert
    await expectInvariants(w, { M: ["s", "web"] });
    await expectNoLeaks(w);
  });

  it("2. keeps a mesh on the waiting list when an older pass's removal lands after a newer pass's addition", async () => {
    // Arrange: a full /30, M{a,b} and N{n1,n2}, no quarantine; c joins M, unallocated
    let hold: ReturnType<typeof holdOnce> | undefined;
    const w = await world(
      { VIP_CIDR: "240.0.0.0/30", VIP_QUARANTINE_SECONDS: "0" },
      {
        handlerClient: (client) => {
          hold = holdOnce(
            client,
            (command, input) =>
              command === "UpdateItemCommand" &&
              keyOf(input.Key) === "waiting" &&
              // a removal (an addition SETs the entry)
              !String(input.UpdateExpression).startsWith("SET"),
          );
        },
      },
    );
    const r = records(w);
    const n12 = dataplane("N", "dp", ["n1", "n2"]);
    await w.invoke({
      Records: [
        await r.mesh("M"),
        await r.mesh("N"),
        await r.put(dataplane("M", "dp", ["a", "b"])),
      ],
    });
    await w.invoke({ Records: [await r.put(n12)] });
    await w.invoke({ Records: [await r.put(dataplane("M", "dp-c", ["c"]))] });
    expect(Object.keys((await w.vipItem("M"))?.unallocated ?? {})).toEqual(["c"]);

    // Act: n1 leaves N; the woken pass of M gives c the address and is held before it takes M
    // off the list; d joins M (the range is full again); the removal lands; n2 leaves N
    const n2 = dataplane("N", "dp", ["n2"]);
    hold?.arm();
    const a = w.invoke({ Records: [await r.put(n2, n12)] });
    await hold?.reached;
    await w.invoke({ Records: [await r.put(dataplane("M", "dp-d", ["d"]))] });
    expect(Object.keys((await w.vipItem("M"))?.unallocated ?? {})).toEqual(["d"]);
    hold?.release();
    await a;
    await w.invoke({ Records: [await r.put(dataplane("N", "dp", []), n2)] });

    // Assert: the address n2 left went to d
    const [item] = (await expectInvariants(w, { M: ["a", "b", "c", "d"], N: [] })).filter(
      (found) => found.mesh === "M",
    );
    expect(item?.unallocated).toBeUndefined();
  });

  it("3. renumbers a mesh whose range record an older configuration's pass overtook", async () => {
    // Arrange: M lists web under the old range; a new-range handler beside the old one
    let hold: ReturnType<typeof holdOnce> | undefined;
    const w = await world(
      { VIP_CIDR: "240.0.0.0/27" },
      {
        handlerClient: (client) => {
          hold = holdOnce(
            client,
            (command, input) =>
              command === "PutItemCommand" && String(keyOf(input.Item)).startsWith("range#"),
          );
        },
      },
    );
    const r = records(w);
    const fresh = w.handlerWith({ VIP_CIDR: "10.0.0.0/24" });
    await w.invoke({ Records: [await r.mesh("M"), await r.put(dataplane("M", "web-1", ["web"]))] });

    // Act: the new range renumbers M and is held before it records the range; the old range
    // passes M for db; the record lands; a new-range record changes no presence
    hold?.arm();
    const renumbering = fresh({ Records: [await r.put(dataplane("M", "web-2", ["web"]))] });
    await hold?.reached;
    await w.invoke({ Records: [await r.put(dataplane("M", "db-1", ["db"]))] });
    expect((await w.vipItem("M"))?.cidr).toBe("240.0.0.0/27");
    hold?.release();
    await renumbering;
    await fresh({ Records: [await r.put(dataplane("M", "web-3", ["web"]))] });

    // Assert
    expect((await w.vipItem("M"))?.cidr).toBe("10.0.0.0/24");
    expect(Object.keys((await w.vipItem("M"))?.vips ?? {}).sort()).toEqual(["db", "web"]);
  });

  it("4. passes a mesh whose index a sweep repaired when the sweep's item writes are throttled, when the held record comes", async () => {
    // Arrange: M lists web; db-1 is stored with db, and its record is held back
    const w = await world();
    const r = records(w);
    await w.invoke({ Records: [await r.mesh("M"), await r.put(dataplane("M", "web-1", ["web"]))] });
    const held = await r.put(dataplane("M", "db-1", ["db"]));

    // Act: a sweep whose item writes are all throttled repairs M's index and fails its pass;
    // then the held record is delivered
    const client = createDynamoClient(w.config, { region: "us-east-1", credentials: CREDENTIALS });
    throttle(
      client,
      () => true,
      isItemWrite(() => w),
    );
    const runtime = createRuntime(w.config, { client });
    await expect(
      sweep({ ...runtime.ports, telemetry: new InMemoryTelemetry() }, { ...runtime.settings }),
    ).rejects.toThrow(/allowed throughput/);
    client.destroy();
    const index = dynamoPorts(w.config, w.client).index;
    const record = (await index.getContributors([{ mesh: "M", name: "db-1" }])).get(
      JSON.stringify(["M", "db-1"]),
    );
    expect(record?.contributions).toEqual([{ mesh: "M", service: "db" }]);
    await w.invoke({ Records: [held] });

    // Assert
    await expectInvariants(w, { M: ["db", "web"] });
    await expectNoLeaks(w);
  });

  it("5. releases a new service whose item write was throttled after its claim when its dataplane is gone before the retry", async () => {
    // Arrange: M lists web; db-1 joins with db while every item write is throttled
    const { w, fault } = await throttledWorld(isItemWrite);
    const r = records(w);
    await w.invoke({ Records: [await r.mesh("M"), await r.put(dataplane("M", "web-1", ["web"]))] });
    const db = dataplane("M", "db-1", ["db"]);
    const joins = await r.put(db);
    fault.armed = true;
    const failed = await w.invoke({ Records: [joins] });
    fault.armed = false;
    expect(failed.batchItemFailures).toHaveLength(1);
    expect((await claimsOf(w)).find((claim) => claim.service === "db")?.meshes.has("M")).toBe(true);

    // Act: db-1 is deleted before the retry; the retried batch holds both records
    await w.invoke({ Records: [joins, await r.remove(db)] });

    // Assert
    await expectInvariants(w, { M: ["web"] });
    await expectNoLeaks(w);
    const claim = (await claimsOf(w)).find((found) => found.service === "db");
    expect(claim?.meshes.size).toBe(0);
    expect(claim?.releasedAt).toBeDefined();
  });
});
