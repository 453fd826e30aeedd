/**
 * Regression tests, on the local engine through the real handler and poller, for five defects found
 * by fault injection and fuzzing: JavaScript property names as service and mesh names, range
 * exhaustion reported while addresses were free, a service with two VIPs after a partly seen
 * VIP_CIDR change, memberships left behind by a crash or a lost response, and bad events.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { GetCommand, PutCommand } from "@aws-sdk/lib-dynamodb";
import { describe, expect, it } from "vitest";
import {
  dataplane,
  expectInvariants,
  type World,
  type WorldOptions,
  worldsOnTheEngine,
} from "./harness.ts";

const world = worldsOnTheEngine();

/** Every own property name of `Object.prototype` that is a valid service name. */
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype).filter((name) =>
  /^[A-Za-z0-9.\-_:]{1,253}$/.test(name),
);

interface Fault {
  readonly command: string;
  readonly table: (world: World) => string;
  readonly when?: (input: Record<string, unknown>) => boolean;
  /** "kill": the invocation dies right after the write; "lost": the response is lost, the SDK retries. */
  readonly kind: "kill" | "lost";
}

/**
 * A client middleware that lets the first matching request succeed in DynamoDB, then throws
 * instead of returning its response.
 */
function injectOnce(fault: Fault, tables: () => World | undefined): WorldOptions {
  return {
    handlerClient(client: DynamoDBClient) {
      let armed = true;
      client.middlewareStack.add(
        (next, context) => async (args) => {
          const output = await next(args);
          const input = args.input as Record<string, unknown>;
          const w = tables();
          if (
            armed &&
            w !== undefined &&
            context.commandName === fault.command &&
            input.TableName === fault.table(w) &&
            (fault.when?.(input) ?? true)
          ) {
            armed = false;
            if (fault.kind === "kill") throw new Error("injected: the invocation died here");
            throw Object.assign(new Error("injected: the response was lost"), {
              name: "ThrottlingException",
              $metadata: { httpStatusCode: 400 },
            });
          }
          return output;
        },
        { step: "deserialize", name: "injectFaultOnce" },
      );
    },
  };
}

describe("defect 1: names are data", () => {
  it("gives every JavaScript property name a VIP, as a service and as a mesh, alone and together", async () => {
    const w = await world();
    const expected = new Map<string, string[]>();
    for (const [index, name] of PROTOTYPE_NAMES.entries()) {
      await w.putMesh(name);
      await w.putDataplane(dataplane(name, `dp-${index}`, [name]));
      expected.set(name, [name]);
    }
    await w.putMesh("together");
    await w.putDataplane(dataplane("together", "dp-all", [...PROTOTYPE_NAMES, "web"]));
    expected.set("together", [...PROTOTYPE_NAMES, "web"]);

    await w.drain();

    const items = await expectInvariants(w, expected);
    for (const item of items) {
      expect(item.unallocated, `mesh ${item.mesh}`).toBeUndefined();
      for (const service of Object.keys(item.vips)) {
        expect(Object.hasOwn(item.vips, service)).toBe(true);
      }
    }
    expect(PROTOTYPE_NAMES).toContain("__proto__");
    expect(PROTOTYPE_NAMES).toContain("constructor");
  });
});

describe("defect 2: exhaustion is reported only when the range is full", () => {
  it("allocates a /27 to four meshes reconciled in one invocation, sharing one service", async () => {
    const w = await world({ VIP_CIDR: "240.0.0.0/27" });
    for (const mesh of ["m1", "m2", "m3", "m4"]) {
      await w.putMesh(mesh);
      await w.putDataplane(dataplane(mesh, "dp", ["shared", `own-${mesh}`]));
    }

    await w.drain();

    const items = await expectInvariants(w, {
      m1: ["own-m1", "shared"],
      m2: ["own-m2", "shared"],
      m3: ["own-m3", "shared"],
      m4: ["own-m4", "shared"],
    });
    for (const item of items) expect(item.unallocated, `mesh ${item.mesh}`).toBeUndefined();
  });

  it("gives a service in two meshes one VIP from a /28 when both meshes are reconciled at once", async () => {
    const w = await world({ VIP_CIDR: "240.0.0.0/28" });
    await w.putMesh("a");
    await w.putMesh("b");
    await w.putDataplane(dataplane("a", "dp", ["s"]));
    await w.putDataplane(dataplane("b", "dp", ["s"]));

    await w.drain();

    const items = await expectInvariants(w, { a: ["s"], b: ["s"] });
    for (const item of items) expect(item.unallocated, `mesh ${item.mesh}`).toBeUndefined();
  });
});

describe("defect 3: a service has its claim's VIP in every mesh after a partly seen CIDR change", () => {
  async function touch(w: World, mesh: string, n: number) {
    await w.doc.send(new PutCommand({ TableName: w.tables.meshes, Item: { name: mesh, n } }));
  }

  for (const [label, finalCidr] of [
    ["a range that holds both addresses", "240.0.0.0/27"],
    ["a rollback to the first range", "240.0.0.0/28"],
  ] as const) {
    it(`converges after ${label}`, async () => {
      const w = await world({ VIP_CIDR: "240.0.0.0/28" });
      await w.putMesh("m1");
      await w.putMesh("m2");
      await w.putDataplane(dataplane("m1", "dp", ["auth"]));
      await w.putDataplane(dataplane("m2", "dp", ["auth"]));
      await w.drain();
      const moved = w.handlerWith({ VIP_CIDR: "240.0.0.16/28" });
      const m1Only = w.delivered.flatMap((event) =>
        event.Records.filter((record) => record.dynamodb?.Keys?.mesh?.S === "m1"),
      );
      await moved({ Records: m1Only });
      expect((await w.vipItem("m1"))?.vips.auth).toBe("240.0.0.16");

      const final = w.handlerWith({ VIP_CIDR: finalCidr });
      for (let round = 0; round < 2; round++) {
        for (const event of [...w.delivered]) await final(event);
      }

      const m1 = await w.vipItem("m1");
      const m2 = await w.vipItem("m2");
      expect(m1?.vips.auth).toBeDefined();
      expect(m1?.vips.auth).toBe(m2?.vips.auth);
    });
  }

  it("keeps one VIP per service when a mesh item is touched again under the same range", async () => {
    const w = await world({ VIP_CIDR: "240.0.0.0/27" });
    await w.putMesh("m1");
    await w.putMesh("m2");
    await w.putDataplane(dataplane("m1", "dp", ["auth"]));
    await w.putDataplane(dataplane("m2", "dp", ["auth"]));
    await w.drain();
    const moved = w.handlerWith({ VIP_CIDR: "240.0.0.16/28" });
    const m1Only = w.delivered.flatMap((event) =>
      event.Records.filter((record) => record.dynamodb?.Keys?.mesh?.S === "m1"),
    );
    await moved({ Records: m1Only });

    await touch(w, "m1", 1);
    await touch(w, "m2", 1);
    await w.drain();

    const m1 = await w.vipItem("m1");
    const m2 = await w.vipItem("m2");
    expect(m1?.vips.auth).toBe(m2?.vips.auth);
  });
});

describe("defect 4: a removed service leaves its mesh whatever fails after the item write", () => {
  const cases: Array<[string, Fault]> = [
    [
      "the invocation dies right after the VIP item write",
      { command: "PutItemCommand", table: (w) => w.tables.vips, kind: "kill" },
    ],
    [
      "the response to the VIP item write is lost",
      { command: "PutItemCommand", table: (w) => w.tables.vips, kind: "lost" },
    ],
    [
      "the response to the membership update is lost",
      {
        command: "UpdateItemCommand",
        table: (w) => w.tables.claims,
        when: (input) => String(input.UpdateExpression).startsWith("REMOVE"),
        kind: "lost",
      },
    ],
  ];
  for (const [label, fault] of cases) {
    it(`frees the address for a newcomer in a full /30 when ${label}`, async () => {
      let current: World | undefined;
      let faulty = false;
      const w = await world(
        { VIP_CIDR: "240.0.0.0/30", VIP_QUARANTINE_SECONDS: "0" },
        injectOnce(fault, () => (faulty ? current : undefined)),
      );
      current = w;
      await w.putMesh("default");
      for (const service of ["a", "b", "c", "d"]) {
        await w.putDataplane(dataplane("default", `dp-${service}`, [service]));
      }
      await w.drain();
      expect(Object.keys((await w.vipItem("default"))?.vips ?? {})).toHaveLength(4);

      faulty = true;
      await w.deleteDataplane("default", "dp-d");
      await w.drain();
      faulty = false;
      await w.putDataplane(dataplane("default", "dp-e", ["e"]));
      await w.drain();

      const [item] = await expectInvariants(w, { default: ["a", "b", "c", "e"] });
      expect(item?.unallocated).toBeUndefined();
      expect(item?.vips.e).toBeDefined();
    });
  }
});

describe("defect 6: a deleted mesh's services leave it when the response to its item's delete is lost", () => {
  it("releases a service only the deleted mesh used and removes the mesh from a shared one", async () => {
    // Arrange: M lists s1 and s2; s2 is also in N
    let current: World | undefined;
    let faulty = false;
    const w = await world(
      {},
      injectOnce({ command: "DeleteItemCommand", table: (x) => x.tables.vips, kind: "lost" }, () =>
        faulty ? current : undefined,
      ),
    );
    current = w;
    await w.putMesh("M");
    await w.putMesh("N");
    await w.putDataplane(dataplane("M", "dp", ["s1", "s2"]));
    await w.putDataplane(dataplane("N", "dp", ["s2"]));
    await w.drain();

    // Act: M is deleted; the DeleteItem lands, its response is lost, the SDK's retry fails
    // its condition
    faulty = true;
    await w.deleteMesh("M");
    await w.drain();
    faulty = false;

    // Assert
    expect(await w.vipItem("M")).toBeUndefined();
    const claims = await w.doc.send(
      new GetCommand({ TableName: w.tables.claims, Key: { pk: "svc#s1" }, ConsistentRead: true }),
    );
    expect(typeof claims.Item?.releasedAt).toBe("number");
    const shared = await w.doc.send(
      new GetCommand({ TableName: w.tables.claims, Key: { pk: "svc#s2" }, ConsistentRead: true }),
    );
    expect(Object.keys(shared.Item?.meshes ?? {})).toEqual(["N"]);
    await expectInvariants(w, { N: ["s2"] });
  });
});

describe("defect 5: events the handler cannot read", () => {
  it("reports a null event and a null record and returns", async () => {
    const w = await world();

    const nullEvent = await w.invoke(null as never);
    const nullRecord = await w.invoke({ Records: [null as never] });

    expect(nullEvent).toEqual({ batchItemFailures: [] });
    expect(nullRecord).toEqual({ batchItemFailures: [] });
    expect(w.telemetry.issues.length).toBeGreaterThanOrEqual(2);
  });
});
