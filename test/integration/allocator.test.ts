import type { DynamoDBRecord, DynamoDBStreamEvent } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { METRIC } from "../../functions/allocator/telemetry-names.ts";
import { dataplane, expectInvariants, ingress, worldsOnTheEngine } from "./harness.ts";

const world = worldsOnTheEngine();

describe("the allocator against the local engine with real stream records", () => {
  it("derives Kuma's service sets, ingress services going to the mesh they name", async () => {
    const w = await world();
    await w.putMesh("mesh-1");
    await w.putMesh("mesh-2");
    await w.putDataplane(dataplane("mesh-1", "dp-1", ["backend"]));
    await w.putDataplane(dataplane("mesh-1", "dp-2", ["frontend"]));
    await w.putDataplane(dataplane("mesh-1", "dp-3", ["frontend"]));
    await w.putDataplane(dataplane("mesh-1", "dp-4", ["database", "metrics"]));
    await w.putDataplane(dataplane("mesh-2", "dp-1", ["another-mesh-svc"]));
    await w.putDataplane(
      ingress("mesh-1", "ingress-1", [
        { mesh: "mesh-1", service: "ingress-svc" },
        { mesh: "mesh-2", service: "another-mesh-ingress-svc" },
      ]),
    );

    await w.drain();

    await expectInvariants(w, {
      "mesh-1": ["backend", "database", "frontend", "ingress-svc", "metrics"],
      "mesh-2": ["another-mesh-ingress-svc", "another-mesh-svc"],
    });
    const mesh1 = await w.vipItem("mesh-1");
    expect(mesh1?.version).toBeGreaterThanOrEqual(1);
    expect(mesh1?.cidr).toBe("240.0.0.0/4");
  });

  it("allocates sorted services from the lowest address with one writer and fresh state", async () => {
    const w = await world();
    await w.putMesh("default");
    await w.putDataplane(dataplane("default", "dp-1", ["web", "backend", "api"]));

    await w.drain();

    const item = await w.vipItem("default");
    expect(item?.vips).toEqual({ api: "240.0.0.0", backend: "240.0.0.1", web: "240.0.0.2" });
    expect(item?.version).toBe(1);
    expect(item?.incarnation).toMatch(/.+/);
    expect(Date.parse(item?.updatedAt ?? "")).not.toBeNaN();
  });

  it("gives a service in three meshes the same VIP in all of them", async () => {
    const w = await world();
    for (const mesh of ["a", "b", "c"]) {
      await w.putMesh(mesh);
      await w.putDataplane(dataplane(mesh, "dp", ["shared", `only-${mesh}`]));
    }

    await w.drain();

    const items = await expectInvariants(w, {
      a: ["only-a", "shared"],
      b: ["only-b", "shared"],
      c: ["only-c", "shared"],
    });
    const shared = new Set(items.map((item) => item.vips.shared));
    expect(shared.size).toBe(1);
  });

  it("gives a service that returns within the quarantine its old VIP, and not to a newcomer", async () => {
    const w = await world();
    await w.putMesh("m");
    await w.putDataplane(dataplane("m", "dp-srv1", ["srv1"]));
    await w.drain();
    const before = (await w.vipItem("m"))?.vips.srv1;
    expect(before).toBe("240.0.0.0");

    await w.deleteDataplane("m", "dp-srv1");
    await w.drain();
    expect((await w.vipItem("m"))?.vips).toEqual({});
    expect(w.telemetry.total(METRIC.releases)).toBe(1);

    await w.putDataplane(dataplane("m", "dp-srv2", ["srv2"]));
    await w.drain();
    const srv2 = (await w.vipItem("m"))?.vips.srv2;
    expect(srv2).not.toBe(before);

    await w.putDataplane(dataplane("m", "dp-srv1", ["srv1"]));
    await w.drain();
    const after = await w.vipItem("m");
    expect(after?.vips.srv1).toBe(before);
    expect(after?.vips.srv2).toBe(srv2);
    await expectInvariants(w, { m: ["srv1", "srv2"] });
  });

  it("hands a freed address to another service only after the quarantine", async () => {
    // The handler's clock moves only when the test says so: the quarantine runs out between
    // the two drains whatever the machine's speed.
    let clock = Date.parse("2026-12-01T00:00:00Z");
    const w = await world(
      { VIP_CIDR: "10.0.0.0/30", VIP_QUARANTINE_SECONDS: "60" },
      { now: () => clock },
    );
    await w.putMesh("m");
    await w.putDataplane(dataplane("m", "dp", ["s0", "s1", "s2", "s3"]));
    await w.drain();
    await w.deleteDataplane("m", "dp");
    await w.drain();

    await w.putDataplane(dataplane("m", "dp-new", ["n0"]));
    await w.drain();
    expect((await w.vipItem("m"))?.unallocated).toHaveProperty("n0");

    clock += 59_000;
    await w.putDataplane(dataplane("m", "dp-new", ["n0", "n1", "n2"]));
    await w.drain();
    expect(Object.keys((await w.vipItem("m"))?.unallocated ?? {}).sort()).toEqual([
      "n0",
      "n1",
      "n2",
    ]);

    clock += 2_000;
    await w.putDataplane(dataplane("m", "dp-new", ["n0", "n1"]));
    await w.drain();
    const item = await w.vipItem("m");
    expect(Object.keys(item?.vips ?? {}).sort()).toEqual(["n0", "n1"]);
    expect(item?.unallocated).toBeUndefined();
    expect(w.telemetry.total(METRIC.reclaims)).toBe(2);
    await expectInvariants(w, { m: ["n0", "n1"] });
  });

  it("fills a /29 with 8 of 10 services and lists the other 2 as unallocated", async () => {
    const w = await world({ VIP_CIDR: "192.168.10.0/29" });
    await w.putMesh("small");
    const services = Array.from({ length: 10 }, (_, i) => `svc-${String(i).padStart(2, "0")}`);
    await w.putDataplane(dataplane("small", "dp", services));

    await w.drain();

    const item = await w.vipItem("small");
    expect(Object.keys(item?.vips ?? {})).toHaveLength(8);
    expect(Object.keys(item?.unallocated ?? {}).sort()).toEqual(["svc-08", "svc-09"]);
    expect(item?.unallocated?.["svc-08"]).toMatch(/192\.168\.10\.0\/29 exhausted/);
    expect(w.telemetry.total(METRIC.exhausted)).toBeGreaterThanOrEqual(2);
    await expectInvariants(w, { small: services });
  });

  it("creates an empty item for a new mesh and deletes the item with the mesh", async () => {
    const w = await world();
    await w.putMesh("empty");
    await w.drain();
    const created = await w.vipItem("empty");
    expect(created?.vips).toEqual({});
    expect(created?.version).toBe(1);

    await w.putDataplane(dataplane("empty", "dp", ["svc"]));
    await w.drain();
    expect((await w.vipItem("empty"))?.version).toBe(2);

    await w.deleteMesh("empty");
    await w.drain();
    expect(await w.vipItem("empty")).toBeUndefined();
    expect(w.telemetry.total(METRIC.releases)).toBe(1);
  });

  it("produces no item for dataplanes of a missing mesh until the mesh appears", async () => {
    const w = await world();
    await w.putDataplane(dataplane("late", "dp", ["early-bird"]));
    await w.drain();
    expect(await w.vipItem("late")).toBeUndefined();

    await w.putMesh("late");
    await w.drain();
    expect((await w.vipItem("late"))?.vips).toEqual({ "early-bird": "240.0.0.0" });
  });

  it("moves a renamed service to a new VIP and quarantines the old one", async () => {
    const w = await world();
    await w.putMesh("m");
    await w.putDataplane(dataplane("m", "dp", ["old-name"]));
    await w.drain();

    await w.putDataplane(dataplane("m", "dp", ["new-name"]));
    await w.drain();

    const item = await w.vipItem("m");
    expect(item?.vips).toEqual({ "new-name": "240.0.0.1" });
    expect(item?.version).toBe(2);
  });

  it("changes nothing when the same batches are delivered three more times", async () => {
    const w = await world();
    await w.putMesh("m1");
    await w.putMesh("m2");
    await w.putDataplane(dataplane("m1", "dp-1", ["a", "b"]));
    await w.putDataplane(dataplane("m2", "dp-1", ["b", "c"]));
    await w.putDataplane(dataplane("m1", "dp-2", ["d"]));
    await w.deleteDataplane("m1", "dp-2");
    await w.drain();
    const before = await w.allVipItems();
    const events: DynamoDBStreamEvent[] = [...w.delivered];
    expect(events.length).toBeGreaterThan(0);

    for (let round = 0; round < 3; round++) {
      for (const event of events) {
        expect(await w.invoke(event)).toEqual({ batchItemFailures: [] });
      }
    }

    expect(await w.allVipItems()).toEqual(before);
  });

  it("keeps every invariant when four invocations run at once on overlapping meshes", async () => {
    const w = await world({ VIP_CIDR: "10.1.0.0/24" });
    const meshes = ["m1", "m2", "m3"];
    for (const mesh of meshes) await w.putMesh(mesh);
    const expected: Record<string, string[]> = { m1: [], m2: [], m3: [] };
    for (let i = 0; i < 24; i++) {
      const mesh = meshes[i % 3] as string;
      const services = [`shared-${i % 5}`, `own-${i}`];
      await w.putDataplane(dataplane(mesh, `dp-${i}`, services));
      expected[mesh]?.push(...services);
    }
    // Collect the real stream records without processing them, then deliver them as four
    // concurrent invocations that touch overlapping meshes.
    const records: DynamoDBStreamEvent["Records"] = [];
    const collector = await world({
      MESHES_TABLE: w.tables.meshes,
      DATAPLANES_TABLE: w.tables.dataplanes,
      VIPS_TABLE: `${w.tables.vips}-unused`,
      CLAIMS_TABLE: `${w.tables.claims}-unused`,
      VIP_INDEX_TABLE: `${w.tables.index}-unused`,
      VIP_CIDR: "10.1.0.0/24",
    });
    await collector.drain();
    for (const event of collector.delivered) records.push(...event.Records);
    const parts: DynamoDBStreamEvent[] = [0, 1, 2, 3].map((k) => ({
      Records: records.filter((_, index) => index % 4 === k),
    }));

    const results = await Promise.all(parts.map((event) => w.invoke(event)));

    expect(results).toEqual(parts.map(() => ({ batchItemFailures: [] })));
    const dedupe = Object.fromEntries(
      Object.entries(expected).map(([mesh, list]) => [mesh, [...new Set(list)]]),
    );
    const items = await expectInvariants(w, dedupe);
    const allVips = items.flatMap((item) => Object.values(item.vips));
    // 5 shared + 24 own services, each with one VIP
    expect(new Set(allVips).size).toBe(29);
  });

  it("skips malformed items, keeps the good ones and loses no existing VIP", async () => {
    const w = await world();
    await w.putMesh("m");
    await w.putDataplane(dataplane("m", "good", ["good-svc"]));
    await w.drain();
    const good = (await w.vipItem("m"))?.vips["good-svc"];

    await w.putDataplane({
      mesh: "m",
      name: "mixed",
      networking: {
        inbound: [
          { port: 1, tags: { "kuma.io/service": "ok-svc" } },
          { port: 2, tags: { "kuma.io/service": "bad name!" } },
          { port: 3, tags: { "kuma.io/service": 42 } },
          {
            port: 4,
            tags: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, "v"])),
          },
        ],
      },
    });
    await w.putDataplane({ mesh: "m", name: "no-networking" });
    await w.putDataplane({ mesh: "m", name: "bad-inbound", networking: { inbound: "nope" } });
    await w.putDataplane({ mesh: "m", name: "bad-ingress", networking: { ingress: [1, 2] } });
    await w.drain();

    const item = await w.vipItem("m");
    expect(item?.vips["good-svc"]).toBe(good);
    expect(Object.keys(item?.vips ?? {}).sort()).toEqual(["good-svc", "ok-svc"]);
    const fields = w.telemetry.issues.map((issue) => `${String(issue.key.name)} ${issue.field}`);
    expect(fields).toEqual(
      expect.arrayContaining([
        "mixed networking.inbound[1].tags.kuma.io/service",
        "mixed networking.inbound[2].tags.kuma.io/service",
        "mixed networking.inbound[3].tags",
        "no-networking networking",
        "bad-inbound networking.inbound",
        "bad-ingress networking.ingress",
      ]),
    );
    expect(w.telemetry.issues.every((issue) => issue.table === "dataplanes")).toBe(true);
  });

  it("renumbers VIPs outside a new VIP_CIDR, keeping services shared across meshes equal", async () => {
    const w = await world({ VIP_CIDR: "10.9.0.0/24" });
    await w.putMesh("a");
    await w.putMesh("b");
    await w.putDataplane(dataplane("a", "dp", ["shared", "x"]));
    await w.putDataplane(dataplane("b", "dp", ["shared"]));
    await w.drain();
    const renumbering = w.handlerWith({ VIP_CIDR: "10.10.0.0/24" });
    const events = [...w.delivered];

    for (const event of events) await renumbering(event);

    const items = await w.allVipItems();
    for (const item of items) {
      expect(item.cidr).toBe("10.10.0.0/24");
      for (const vip of Object.values(item.vips)) expect(vip).toMatch(/^10\.10\.0\./);
    }
    const a = items.find((item) => item.mesh === "a");
    const b = items.find((item) => item.mesh === "b");
    expect(a?.vips.shared).toBe(b?.vips.shared);
    expect(w.telemetry.total(METRIC.renumbered)).toBe(3);
  });

  it("never gives a renumbered service's old VIP to another service when the range is rolled back", async () => {
    const w = await world({ VIP_CIDR: "10.20.0.0/30" });
    await w.putMesh("m1");
    await w.putMesh("m2");
    await w.putDataplane(dataplane("m1", "dp", ["s"]));
    await w.putDataplane(dataplane("m2", "dp", ["s"]));
    await w.drain();
    const original = (await w.vipItem("m2"))?.vips.s;
    // m1's records again under a new range: its mesh record brings the pass (a dataplane record
    // that changes no service set does not, decision 073).
    const ofM1 = (record: DynamoDBRecord) =>
      record.dynamodb?.Keys?.mesh?.S === "m1" ||
      (record.dynamodb?.Keys?.mesh === undefined && record.dynamodb?.Keys?.name?.S === "m1");
    const m1Events = w.delivered.filter((event) => event.Records.some(ofM1));
    const newRange = w.handlerWith({ VIP_CIDR: "10.20.1.0/30" });
    for (const event of m1Events) await newRange({ Records: event.Records.filter(ofM1) });
    expect((await w.vipItem("m1"))?.vips.s).toMatch(/^10\.20\.1\./);

    // Back to the first range; every mesh is reconciled, then new services arrive.
    for (const event of [...w.delivered]) await w.invoke(event);
    await w.putMesh("m3");
    await w.putDataplane(dataplane("m3", "dp", ["t", "u", "v"]));
    await w.drain();

    const items = await expectInvariants(w);
    const others = items.flatMap((item) =>
      Object.entries(item.vips).filter(([service]) => service !== "s"),
    );
    expect(others.map(([, vip]) => vip)).not.toContain(original);
  });

  it("skips a record from an unknown stream and a record without keys without failing", async () => {
    const w = await world();
    const event: DynamoDBStreamEvent = {
      Records: [
        {
          eventName: "INSERT",
          eventSourceARN: "arn:aws:dynamodb:us-east-1:123456789012:table/other/stream/x",
          dynamodb: { SequenceNumber: "100", Keys: { name: { S: "m" } } },
        },
        {
          eventName: "INSERT",
          eventSourceARN: `arn:aws:dynamodb:us-east-1:123456789012:table/${w.tables.meshes}/stream/x`,
          dynamodb: { SequenceNumber: "101", Keys: {} },
        },
      ],
    };

    expect(await w.invoke(event)).toEqual({ batchItemFailures: [] });
    expect(w.telemetry.issues.map((issue) => issue.field)).toEqual(["eventSourceARN", "Keys.name"]);
  });
});
