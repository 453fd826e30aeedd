/**
 * Hosts of external services on the reading side: the stored item lists them apart (`hosts`,
 * `unallocatedHosts`), the reader exposes them, and the DNS name table answers the host name
 * itself (A/AAAA) and names the host in PTR.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAddress } from "../../functions/domain/external-service.ts";
import { hostEntry, isIpLiteral } from "../../functions/domain/hosts.ts";
import { recordOf } from "../../functions/domain/records.ts";
import type { VipItem } from "../../functions/domain/types.ts";
import {
  diffMesh,
  meshViewOf,
  NameTable,
  reverseName,
  VipSnapshot,
} from "../../functions/reader/index.ts";
import {
  decodeAllocatorItem,
  decodeVipItem,
  encodeVipItem,
} from "../../functions/store/vip-item-codec.ts";
import { readFailureFile } from "../../tools/cli/commands/failures.ts";

function item(mesh: string, vips: Record<string, string>, extra: Partial<VipItem> = {}): VipItem {
  return {
    mesh,
    version: 3,
    vips: recordOf(Object.entries(vips)),
    cidr: "240.0.0.0/4",
    updatedAt: "2026-12-03T00:00:00.000Z",
    incarnation: `inc-${mesh}`,
    ...extra,
  };
}

const A = item(
  "A",
  {
    web: "240.0.0.1",
    "api.example.com": "240.0.0.2",
    [hostEntry("api.example.com")]: "240.0.0.3",
    [hostEntry("db.example.com")]: "240.0.0.4",
  },
  { unallocated: recordOf([[hostEntry("late.example.com"), "range exhausted"]]) },
);

describe("the stored VIP item with hosts", () => {
  it("lists services in vips and hosts apart, and reads back either way", () => {
    const { stored } = encodeVipItem(A);
    expect(stored.vips).toEqual({ web: "240.0.0.1", "api.example.com": "240.0.0.2" });
    expect(stored.hosts).toEqual({ "api.example.com": "240.0.0.3", "db.example.com": "240.0.0.4" });
    expect(stored.unallocated).toEqual({});
    expect(stored.unallocatedHosts).toEqual({ "late.example.com": "range exhausted" });

    expect(decodeAllocatorItem(stored)).toEqual(A);
    const readers = decodeVipItem(stored);
    expect(readers.vips).toEqual(stored.vips);
    expect(readers.hosts).toEqual(stored.hosts);
    expect(readers.unallocatedHosts).toEqual(stored.unallocatedHosts);
  });

  it("stores an item without hosts exactly as before (no new attributes)", () => {
    const plain = item("B", { web: "240.0.0.1" });
    const { stored } = encodeVipItem(plain);
    expect(Object.keys(stored).sort()).toEqual(
      ["cidr", "incarnation", "mesh", "updatedAt", "version", "vips"].sort(),
    );
    expect(decodeVipItem(stored)).toEqual(plain);
  });

  it("keeps hosts in the compact format 2", () => {
    const vips: Record<string, string> = { [hostEntry("big.example.com")]: "241.0.0.1" };
    for (let i = 0; i < 3000; i++) vips[`service-number-${i}`] = `240.0.${i >> 8}.${i & 255}`;
    const big = item("big", vips);
    const { stored } = encodeVipItem(big);
    expect(stored.format).toBe(2);
    expect(stored.serviceCount).toBe(3000);
    expect(decodeAllocatorItem(stored)).toEqual(big);
    expect(decodeVipItem(stored).hosts).toEqual({ "big.example.com": "241.0.0.1" });
  });
});

describe("the reader and the DNS names of hosts", () => {
  const view = meshViewOf(encodeVipItem(A).stored).view;
  if (view === undefined) throw new Error("no view");
  const snapshot = new VipSnapshot(new Map([["A", view]]));

  it("exposes hosts per mesh and by name", () => {
    expect([...view.hosts]).toEqual([
      ["api.example.com", "240.0.0.3"],
      ["db.example.com", "240.0.0.4"],
    ]);
    expect([...view.vips.keys()].sort()).toEqual(["api.example.com", "web"]);
    expect(snapshot.lookupHost("DB.example.com")).toEqual({
      host: "db.example.com",
      vip: "240.0.0.4",
      meshes: ["A"],
    });
    expect(snapshot.reverseHost("240.0.0.4")?.host).toBe("db.example.com");
    expect(snapshot.reverse("240.0.0.4")).toBeUndefined();
  });

  it("answers the host name itself, and PTR names the host", () => {
    const names = new NameTable(snapshot, { domain: "mesh" });
    expect(names.resolve("db.example.com.", "A").answers).toEqual([
      { name: "db.example.com", type: "A", data: "240.0.0.4" },
    ]);
    expect(names.resolve(reverseName("240.0.0.4"), "PTR").answers).toEqual([
      { name: reverseName("240.0.0.4"), type: "PTR", data: "db.example.com" },
    ]);
    // The service of the same spelling answers under the domain; the host under its own name.
    expect(names.resolve("api.example.com.mesh", "A").answers[0]?.data).toBe("240.0.0.2");
    expect(names.resolve("api.example.com", "A").answers[0]?.data).toBe("240.0.0.3");
    // Other names outside the domain are still refused.
    expect(names.resolve("other.example.com", "A").status).toBe("REFUSED");
  });

  it("lets a service keep its name when a host under the domain wants it too", () => {
    const clash = item("C", { web: "240.0.0.1", [hostEntry("web.mesh")]: "240.0.0.9" });
    const clashView = meshViewOf(encodeVipItem(clash).stored).view;
    if (clashView === undefined) throw new Error("no view");
    const names = new NameTable(new VipSnapshot(new Map([["C", clashView]])), { domain: "mesh" });
    expect(names.resolve("web.mesh", "A").answers[0]?.data).toBe("240.0.0.1");
    expect(names.collisions).toEqual([
      { name: "web.mesh", winner: "web", losers: ["host/web.mesh"] },
    ]);
  });
});

describe("the diff of a mesh's hosts", () => {
  it("is a change when only a host moved, so the DNS names are rebuilt", () => {
    const viewOf = (vips: Record<string, string>, version: number) => {
      const decoded = meshViewOf(encodeVipItem(item("A", vips, { version })).stored).view;
      if (decoded === undefined) throw new Error("no view");
      return decoded;
    };
    const before = viewOf({ web: "240.0.0.1", [hostEntry("x.example.com")]: "240.0.0.2" }, 1);
    const after = viewOf({ web: "240.0.0.1" }, 2);
    expect(diffMesh("A", before, after)).toEqual({
      mesh: "A",
      change: "changed",
      version: 2,
      previousVersion: 1,
      added: [],
      removed: [],
      changed: [],
      hosts: { added: [], removed: [{ service: "x.example.com", vip: "240.0.0.2" }], changed: [] },
    });
    // Without hosts the diff keeps its shape (no `hosts`).
    expect(diffMesh("A", after, viewOf({ web: "240.0.0.3" }, 3))).not.toHaveProperty("hosts");
  });
});

describe("external service addresses", () => {
  it("takes the host of host:port and [ipv6]:port, lower case, without a trailing dot", () => {
    expect(parseAddress("API.Example.com.:443")).toEqual({ host: "api.example.com" });
    expect(parseAddress("[2001:db8::1]:8443")).toEqual({ host: "2001:db8::1" });
    expect(parseAddress("httpbin.org:80")).toEqual({ host: "httpbin.org" });
    for (const bad of ["x", "x:", "x:0", "x:65536", ":80", "a b:80", "[x]:80", "::1:80"]) {
      expect(parseAddress(bad), bad).toHaveProperty("reason");
    }
  });

  it("tells IP literals from names", () => {
    expect(isIpLiteral("192.0.2.1")).toBe(true);
    expect(isIpLiteral("2001:db8::1")).toBe(true);
    expect(isIpLiteral("192.0.2")).toBe(false);
    expect(isIpLiteral("api.example.com")).toBe(false);
  });
});

describe("the failure destination's entries", () => {
  it("names an external-services stream's entry by its table", () => {
    const dir = mkdtempSync(join(tmpdir(), "vips-es-failures-"));
    try {
      const file = join(dir, "failures.jsonl");
      const arn = (table: string) =>
        `arn:aws:dynamodb:us-east-1:000000000000:table/${table}/stream/2026-01-01T00:00:00.000`;
      writeFileSync(
        file,
        `${[arn("es"), arn("dps")]
          .map((streamArn) => JSON.stringify({ DDBStreamBatchInfo: { streamArn, batchSize: 1 } }))
          .join("\n")}\n`,
      );
      const entries = readFailureFile(
        file,
        { meshes: "m", dataplanes: "dps", externalServices: "es" },
        () => {
          throw new Error("no bad line expected");
        },
      );
      expect(entries.map((entry) => entry.table)).toEqual(["external-services", "dataplanes"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
