import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import dnsPacket from "dns-packet";
import { describe, expect, it, vi } from "vitest";
import { emptyRecord, recordOf } from "../../functions/domain/records.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import {
  addressOfReverseName,
  answerQuery,
  checkDnsTtl,
  DnsTtlError,
  diffMesh,
  diffSnapshots,
  diffStreamRecord,
  kumaVariant,
  type MeshView,
  meshViewOf,
  NameTable,
  reverseName,
  serveDns,
  summarizeDiff,
  VipReader,
  VipReaderError,
  VipSnapshot,
} from "../../functions/reader/index.ts";
import { toAttributeMap } from "../../functions/store/attribute-values.ts";
import { encodeVipItem } from "../../functions/store/vip-item-codec.ts";
import { digHint } from "../../tools/cli/commands/demo.ts";
import { checkTtl } from "../../tools/cli/commands/dns.ts";
import { seededRandom as random } from "../fixtures/in-memory-ports.ts";

function item(mesh: string, vips: Iterable<readonly [string, string]>, version = 1): VipItem {
  return {
    mesh,
    version,
    vips: recordOf(vips),
    cidr: "240.0.0.0/4",
    updatedAt: "2026-12-03T00:00:00.000Z",
    incarnation: `inc-${mesh}`,
  };
}

function view(mesh: string, vips: Iterable<readonly [string, string]>, version = 1): MeshView {
  const { view: decoded } = meshViewOf(encodeVipItem(item(mesh, vips, version)).stored);
  if (decoded === undefined) throw new Error("not a view");
  return decoded;
}

function snapshot(...views: MeshView[]): VipSnapshot {
  return new VipSnapshot(new Map(views.map((v) => [v.mesh, v])));
}

describe("reverse names", () => {
  it("writes IPv4 under in-addr.arpa and IPv6 as nibbles under ip6.arpa, and reads them back", () => {
    expect(reverseName("240.0.0.7")).toBe("7.0.0.240.in-addr.arpa");
    const v6 = reverseName("fd00::12");
    expect(v6).toBe(`2.1.0.0.${"0.".repeat(24)}0.0.d.f.ip6.arpa`);
    expect(v6.split(".")).toHaveLength(34);
    expect(addressOfReverseName("7.0.0.240.in-addr.arpa.")).toBe("240.0.0.7");
    expect(addressOfReverseName(v6.toUpperCase())).toBe("fd00::12");
    expect(addressOfReverseName("0.240.in-addr.arpa")).toBeUndefined();
    expect(addressOfReverseName("300.0.0.240.in-addr.arpa")).toBeUndefined();
  });
});

describe("the name table", () => {
  const snap = snapshot(
    view("default", [
      ["web", "240.0.0.1"],
      ["backend_kuma-demo_svc_8080", "240.0.0.2"],
      ["constructor", "240.0.0.3"],
      ["__proto__", "240.0.0.4"],
    ]),
  );
  const table = new NameTable(snap, { domain: "Mesh" });

  it("answers A for <service>.<domain> and the Kuma variant, case-insensitively", () => {
    expect(kumaVariant("backend_kuma-demo_svc_8080")).toBe("backend.kuma-demo.svc.8080");
    expect(kumaVariant("web")).toBeUndefined();
    expect(table.resolve("WEB.Mesh.", "A")).toEqual({
      status: "NOERROR",
      answers: [{ name: "web.mesh", type: "A", data: "240.0.0.1" }],
    });
    expect(table.resolve("backend_kuma-demo_svc_8080.mesh", "A").answers[0]?.data).toBe(
      "240.0.0.2",
    );
    expect(table.resolve("Backend.Kuma-Demo.svc.8080.mesh", "A").answers[0]?.data).toBe(
      "240.0.0.2",
    );
  });

  it("treats names as data: constructor and __proto__ resolve, toString does not", () => {
    expect(table.resolve("constructor.mesh", "A").answers[0]?.data).toBe("240.0.0.3");
    expect(table.resolve("__proto__.mesh", "A").answers[0]?.data).toBe("240.0.0.4");
    expect(table.resolve("tostring.mesh", "A").status).toBe("NXDOMAIN");
    expect(table.resolve("4.0.0.240.in-addr.arpa", "PTR").answers[0]?.data).toBe("__proto__.mesh");
  });

  it("gives NOERROR without answers for an existing name of another type, NXDOMAIN inside, REFUSED outside", () => {
    expect(table.resolve("web.mesh", "AAAA")).toEqual({ status: "NOERROR", answers: [] });
    expect(table.resolve("web.mesh", "TXT")).toEqual({ status: "NOERROR", answers: [] });
    // The apex and the parents of a rewritten name exist (empty non-terminals).
    expect(table.resolve("mesh", "A").status).toBe("NOERROR");
    expect(table.resolve("svc.8080.mesh", "A").status).toBe("NOERROR");
    expect(table.resolve("nothing.mesh", "A")).toEqual({ status: "NXDOMAIN", answers: [] });
    expect(table.resolve("web.example.com", "A")).toEqual({ status: "REFUSED", answers: [] });
    expect(table.resolve("webmesh", "A").status).toBe("REFUSED");
  });

  it("answers PTR for a VIP with the name it resolves under; unknown VIPs in the range are NXDOMAIN, others REFUSED", () => {
    expect(table.resolve("1.0.0.240.in-addr.arpa", "PTR")).toEqual({
      status: "NOERROR",
      answers: [{ name: "1.0.0.240.in-addr.arpa", type: "PTR", data: "web.mesh" }],
    });
    expect(table.resolve("2.0.0.240.in-addr.arpa", "PTR").answers[0]?.data).toBe(
      "backend_kuma-demo_svc_8080.mesh",
    );
    expect(table.resolve("9.0.0.240.in-addr.arpa", "PTR").status).toBe("NXDOMAIN");
    expect(table.resolve("1.0.0.10.in-addr.arpa", "PTR").status).toBe("REFUSED");
  });

  it("resolves collisions deterministically: exact beats rewritten, then the smaller name", () => {
    const colliding = new NameTable(
      snapshot(
        view("a", [
          ["a.b", "240.0.0.1"],
          ["a_b", "240.0.0.2"],
          ["x_y", "240.0.0.3"],
          ["X_Y", "240.0.0.4"],
          ["Web", "240.0.0.5"],
          ["web", "240.0.0.6"],
        ]),
      ),
      { domain: "mesh" },
    );
    expect(colliding.resolve("a.b.mesh", "A").answers[0]?.data).toBe("240.0.0.1");
    // a_b keeps its exact name.
    expect(colliding.resolve("a_b.mesh", "A").answers[0]?.data).toBe("240.0.0.2");
    // x_y and X_Y want x_y.mesh (exact, case) and x.y.mesh (rewritten): "X_Y" < "x_y".
    expect(colliding.resolve("x_y.mesh", "A").answers[0]?.data).toBe("240.0.0.4");
    expect(colliding.resolve("x.y.mesh", "A").answers[0]?.data).toBe("240.0.0.4");
    expect(colliding.resolve("web.mesh", "A").answers[0]?.data).toBe("240.0.0.5");
    expect(colliding.collisions).toEqual([
      { name: "a.b.mesh", winner: "a.b", losers: ["a_b"] },
      { name: "web.mesh", winner: "Web", losers: ["web"] },
      { name: "x.y.mesh", winner: "X_Y", losers: ["x_y"] },
      { name: "x_y.mesh", winner: "X_Y", losers: ["x_y"] },
    ]);
    // The same input in another order gives the same table.
    const reordered = new NameTable(
      snapshot(
        view("a", [
          ["web", "240.0.0.6"],
          ["x_y", "240.0.0.3"],
          ["Web", "240.0.0.5"],
          ["a_b", "240.0.0.2"],
          ["X_Y", "240.0.0.4"],
          ["a.b", "240.0.0.1"],
        ]),
      ),
      { domain: "mesh" },
    );
    expect(reordered.collisions).toEqual(colliding.collisions);
  });

  it("answers AAAA for an IPv6 VIP and skips names that cannot be DNS names", () => {
    const long = "s".repeat(64);
    const v6 = new NameTable(
      snapshot(
        view("six", [
          ["api", "fd00::12"],
          [long, "fd00::13"],
        ]),
      ),
      { domain: "svc.local" },
    );
    expect(v6.resolve("api.svc.local", "AAAA").answers).toEqual([
      { name: "api.svc.local", type: "AAAA", data: "fd00::12" },
    ]);
    expect(v6.resolve("api.svc.local", "A")).toEqual({ status: "NOERROR", answers: [] });
    expect(v6.resolve(reverseName("fd00::12"), "PTR").answers[0]?.data).toBe("api.svc.local");
    expect(v6.unservable).toEqual([long]);
  });
});

describe("the snapshot", () => {
  it("looks a service up in every mesh and a VIP in any textual form", () => {
    const snap = snapshot(
      view("default", [
        ["auth", "fd00::1"],
        ["web", "fd00::2"],
      ]),
      view("payments", [["auth", "fd00::1"]]),
    );
    expect(snap.lookup("auth")).toEqual({
      service: "auth",
      vip: "fd00::1",
      meshes: ["default", "payments"],
      addresses: [{ vip: "fd00::1", meshes: ["default", "payments"] }],
    });
    expect(snap.reverse("fd00:0:0::0001")).toMatchObject({ service: "auth", vip: "fd00::1" });
    expect(snap.lookup("constructor")).toBeUndefined();
    expect(snap.meshes()).toEqual(["default", "payments"]);
  });

  it("skips a VIP that is not an address and reports it; rejects an item without a version", () => {
    const { view: v, issues } = meshViewOf({
      mesh: "m",
      version: 3,
      vips: recordOf([
        ["ok", "240.0.0.1"],
        ["bad", "not-an-ip"],
      ]),
    });
    expect([...(v?.vips ?? [])]).toEqual([["ok", "240.0.0.1"]]);
    expect(issues).toEqual([
      { mesh: "m", version: 3, service: "bad", reason: 'VIP "not-an-ip" is not an address' },
    ]);
    expect(meshViewOf({ mesh: "m", version: "x", vips: emptyRecord() }).view).toBeUndefined();
    const gz = meshViewOf({ mesh: "m", version: 1, format: 2, vipsGz: Buffer.from("nope") });
    expect(gz.view).toBeUndefined();
    expect(gz.issues[0]?.reason).toMatch(/cannot decode/);
  });
});

describe("diffs", () => {
  const v1 = view(
    "default",
    [
      ["web", "240.0.0.1"],
      ["api", "240.0.0.2"],
      ["constructor", "240.0.0.3"],
    ],
    1,
  );
  const v2 = view(
    "default",
    [
      ["web", "240.0.0.1"],
      ["api", "240.0.0.9"],
      ["__proto__", "240.0.0.4"],
    ],
    2,
  );

  it("lists added, removed and renumbered services, sorted", () => {
    expect(diffMesh("default", v1, v2)).toEqual({
      mesh: "default",
      change: "changed",
      version: 2,
      previousVersion: 1,
      added: [{ service: "__proto__", vip: "240.0.0.4" }],
      removed: [{ service: "constructor", vip: "240.0.0.3" }],
      changed: [{ service: "api", from: "240.0.0.2", to: "240.0.0.9" }],
    });
    expect(diffMesh("default", v1, view("default", [...v1.vips], 5))).toBeUndefined();
  });

  it("reports meshes added and removed", () => {
    const other = view("edge", [["gw", "240.0.0.8"]]);
    const diff = diffSnapshots(
      new Map([
        ["default", v1],
        ["edge", other],
      ]),
      new Map([
        ["default", v1],
        ["payments", v2],
      ]),
    );
    expect(diff.meshesAdded).toEqual(["payments"]);
    expect(diff.meshesRemoved).toEqual(["edge"]);
    expect(diff.meshes.map((m) => [m.mesh, m.change])).toEqual([
      ["edge", "removed"],
      ["payments", "added"],
    ]);
    expect(summarizeDiff(diff)).toBe("+3 -1 ~0 VIPs in 2 meshes (meshes +1 -1)");
  });

  it("diffs a vips stream record in either format, binary as Lambda's base64 or as bytes", () => {
    const big: [string, string][] = [];
    for (let i = 0; i < 3000; i++) big.push([`svc-${i}_ns_svc_80`, `240.0.${i >> 8}.${i & 255}`]);
    const oldStored = encodeVipItem(item("big", big, 4)).stored;
    const newStored = encodeVipItem(
      item("big", [...big.slice(1), ["__proto__", "240.0.100.1"]], 5),
    ).stored;
    expect(newStored.format).toBe(2);
    const asLambda = (stored: Record<string, unknown>) => {
      const image = toAttributeMap(stored) as Record<string, { B?: Uint8Array }>;
      const gz = image.vipsGz?.B;
      if (gz !== undefined) image.vipsGz = { B: Buffer.from(gz).toString("base64") as never };
      return image;
    };
    const expected = {
      mesh: "big",
      change: "changed",
      version: 5,
      previousVersion: 4,
      added: [{ service: "__proto__", vip: "240.0.100.1" }],
      removed: [{ service: "svc-0_ns_svc_80", vip: "240.0.0.0" }],
      changed: [],
    };
    expect(
      diffStreamRecord({
        eventName: "MODIFY",
        dynamodb: { OldImage: asLambda(oldStored), NewImage: asLambda(newStored) },
      }),
    ).toEqual(expected);
    expect(
      diffStreamRecord({
        dynamodb: { OldImage: toAttributeMap(oldStored), NewImage: toAttributeMap(newStored) },
      }),
    ).toEqual(expected);
    const plain = encodeVipItem(item("small", [["web", "240.0.0.1"]])).stored;
    expect(
      diffStreamRecord({ eventName: "REMOVE", dynamodb: { OldImage: toAttributeMap(plain) } }),
    ).toMatchObject({ mesh: "small", change: "removed", removed: [{ service: "web" }] });
    expect(() => diffStreamRecord({ dynamodb: {} })).toThrow(VipReaderError);
    try {
      diffStreamRecord({ dynamodb: { NewImage: { mesh: { S: "m" }, version: { S: "x" } } } });
      expect.unreachable();
    } catch (error) {
      expect((error as VipReaderError).code).toBe("MALFORMED_ITEM");
    }
  });
});

describe("answerQuery", () => {
  const table = new NameTable(snapshot(view("default", [["web", "240.0.0.1"]])), {
    domain: "mesh",
  });
  const ask = (name: string, type: dnsPacket.RecordType = "A") =>
    dnsPacket.encode({
      type: "query",
      id: 4242,
      flags: dnsPacket.RECURSION_DESIRED,
      questions: [{ type, name, class: "IN" }],
    });

  it("answers with the question, authoritative, the TTL, and the rcode", () => {
    const reply = dnsPacket.decode(
      answerQuery(ask("Web.Mesh"), table, { ttl: 30, transport: "udp" }) as Buffer,
    ) as dnsPacket.DecodedPacket & { rcode: string };
    expect(reply).toMatchObject({ id: 4242, type: "response", flag_aa: true, rcode: "NOERROR" });
    expect(reply.flag_rd).toBe(true);
    expect(reply.answers).toEqual([
      expect.objectContaining({ name: "web.mesh", type: "A", ttl: 30, data: "240.0.0.1" }),
    ]);
    const nx = dnsPacket.decode(
      answerQuery(ask("nope.mesh"), table, { ttl: 30, transport: "udp" }) as Buffer,
    ) as dnsPacket.DecodedPacket & { rcode: string };
    expect(nx.rcode).toBe("NXDOMAIN");
    const refused = dnsPacket.decode(
      answerQuery(ask("example.com"), table, { ttl: 30, transport: "tcp" }) as Buffer,
    ) as dnsPacket.DecodedPacket & { rcode: string };
    expect(refused.rcode).toBe("REFUSED");
  });

  it("gives FORMERR to what does not decode, drops what has no header or is a response", () => {
    const garbage = Buffer.concat([
      Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]),
      Buffer.from([0xff, 0xff]),
    ]);
    const formerr = answerQuery(garbage, table, { ttl: 30, transport: "udp" }) as Buffer;
    expect(formerr.readUInt16BE(0)).toBe(0x1234);
    expect(formerr.readUInt16BE(2) & 0x000f).toBe(1);
    expect(formerr.readUInt16BE(2) & 0x8000).toBe(0x8000);
    expect(
      answerQuery(Buffer.from([1, 2, 3]), table, { ttl: 30, transport: "udp" }),
    ).toBeUndefined();
    const response = Buffer.from(ask("web.mesh"));
    response.writeUInt16BE(response.readUInt16BE(2) | 0x8000, 2);
    expect(answerQuery(response, table, { ttl: 30, transport: "udp" })).toBeUndefined();
  });

  it("never throws on 1,000 random packets (seeded), and still answers after", () => {
    const next = random(20261203);
    const valid = ask("web.mesh");
    let answered = 0;
    for (let i = 0; i < 1000; i++) {
      const packet =
        i % 2 === 0
          ? Buffer.from(
              Array.from({ length: Math.floor(next() * 80) }, () => Math.floor(next() * 256)),
            )
          : Buffer.from(valid.map((byte) => (next() < 0.1 ? Math.floor(next() * 256) : byte)));
      if (answerQuery(packet, table, { ttl: 30, transport: "udp" }) !== undefined) answered++;
    }
    expect(answered).toBeGreaterThan(0);
    const reply = dnsPacket.decode(
      answerQuery(valid, table, { ttl: 30, transport: "udp" }) as Buffer,
    );
    expect(reply.answers?.[0]).toMatchObject({ data: "240.0.0.1" });
  });
});

describe("serveDns", () => {
  it("enforces TTL + interval within the quarantine, before reading the table", async () => {
    const send = vi.fn(async () => {
      throw new Error("no read expected");
    });
    const reader = new VipReader({ client: { send } as unknown as DynamoDBClient, table: "vips" });
    const options = { domain: "mesh", ranges: ["240.0.0.0/4"], intervalMs: 5000 };

    expect(() => checkDnsTtl(30, 5, 35)).not.toThrow();
    await expect(serveDns(reader, { ...options, ttl: 31, quarantineSeconds: 35 })).rejects.toThrow(
      DnsTtlError,
    );
    expect(send).not.toHaveBeenCalled();
  });
});

describe("the CLI's DNS rules", () => {
  it("refuses a TTL that, with the refresh interval, exceeds the quarantine", () => {
    expect(() => checkTtl(30, 5, 3600)).not.toThrow();
    expect(() => checkTtl(30, 5, 35)).not.toThrow();
    expect(() => checkTtl(31, 5, 35)).toThrow(/exceeds the quarantine.*--force/);
  });

  it("hints a dig of a demo service that exists", () => {
    const items = new Map([["default", item("default", [["auth", "240.0.0.0"]])]]);
    expect(digHint(items, 5353, "mesh")).toBe("dig @127.0.0.1 -p 5353 auth.mesh");
  });
});
