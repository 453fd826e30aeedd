/**
 * External services (the optional third input table) through the real batch step on the
 * in-memory ports: their services and hosts in their mesh's set, the same claims as
 * dataplanes' services, and bad input reported item by item.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { describe, expect, it } from "vitest";
import { processBatch } from "../../functions/allocator/batch/process-batch.ts";
import { hostEntry, splitHosts } from "../../functions/domain/hosts.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import {
  type DataplaneItem,
  dataplane,
  dataplaneRecord,
  type ExternalServiceItem,
  externalService,
  externalServiceRecord,
  ingress,
  meshRecord,
} from "../fixtures/builders.ts";
import { World } from "./reconcile-world.ts";

const TABLES = resolveTableNames({ EXTERNAL_SERVICES_TABLE: "external-services" });

async function deliver(world: World, records: DynamoDBRecord[]) {
  return await processBatch({ Records: records }, world.batchPorts(), {
    ...world.batchSettings(),
    tables: TABLES,
    concurrency: 4,
  });
}

function mesh(world: World, name: string): DynamoDBRecord {
  world.source.putMesh(name);
  return meshRecord(TABLES.meshes, name);
}

function putDp(world: World, item: DataplaneItem): DynamoDBRecord {
  world.source.putDataplane(item);
  return dataplaneRecord(TABLES.dataplanes, { newImage: item });
}

function removeDp(world: World, item: DataplaneItem): DynamoDBRecord {
  world.source.deleteDataplane(item.mesh, item.name);
  return dataplaneRecord(TABLES.dataplanes, { oldImage: item });
}

function putEs(world: World, item: ExternalServiceItem, old?: ExternalServiceItem) {
  world.source.putExternalService(item);
  return externalServiceRecord(TABLES.externalServices as string, {
    newImage: item,
    ...(old !== undefined ? { oldImage: old } : {}),
  });
}

function removeEs(world: World, item: ExternalServiceItem): DynamoDBRecord {
  world.source.deleteExternalService(item.mesh, item.name);
  return externalServiceRecord(TABLES.externalServices as string, { oldImage: item });
}

function view(world: World, name: string) {
  const { services, hosts } = splitHosts(world.vips(name) ?? {});
  return { services, hosts };
}

function claimOf(world: World, name: string) {
  return world.claims.serviceClaims().find((claim) => claim.service === name);
}

for (const mode of ["index", "tables"] as const) {
  describe(`external services (service sets from ${mode === "index" ? "the index" : "the tables"})`, () => {
    it("Kuma's 'should build service set for mesh': es-backend in mesh-1, another-mesh-es only in mesh-2", async () => {
      const world = new World({ mode });
      await deliver(world, [
        mesh(world, "mesh-1"),
        mesh(world, "mesh-2"),
        putDp(world, dataplane("mesh-1", "dp-1", ["backend"])),
        putDp(world, dataplane("mesh-1", "dp-2", ["frontend"])),
        putDp(world, dataplane("mesh-1", "dp-3", ["frontend"])),
        putDp(world, dataplane("mesh-1", "dp-4", ["database", "metrics"])),
        putDp(world, dataplane("mesh-2", "dp-5", ["another-mesh-svc"])),
        putDp(
          world,
          ingress("mesh-1", "ingress-1", [
            { mesh: "mesh-1", service: "ingress-svc" },
            { mesh: "mesh-2", service: "another-mesh-ingress-svc" },
          ]),
        ),
        putEs(world, externalService("mesh-1", "es-1", "es-backend", "es-backend.example.com:443")),
        putEs(world, externalService("mesh-2", "es-2", "another-mesh-es", "203.0.113.7:80")),
      ]);

      expect(Object.keys(view(world, "mesh-1").services).sort()).toEqual(
        ["backend", "database", "es-backend", "frontend", "ingress-svc", "metrics"].sort(),
      );
      expect(Object.keys(view(world, "mesh-1").hosts)).toEqual(["es-backend.example.com"]);
      expect(Object.keys(view(world, "mesh-2").services).sort()).toEqual(
        ["another-mesh-es", "another-mesh-ingress-svc", "another-mesh-svc"].sort(),
      );
      // An IP literal gets no host entry.
      expect(view(world, "mesh-2").hosts).toEqual({});
      expect(world.violations()).toEqual([]);
    });

    it("a service served by dataplanes and an external service has one VIP, kept while either serves it", async () => {
      const world = new World({ mode });
      const dp = dataplane("A", "web-1", ["web"]);
      const es = externalService("B", "web-ext", "web", "web.example.com:443");
      await deliver(world, [
        mesh(world, "A"),
        mesh(world, "B"),
        putDp(world, dp),
        putEs(world, es),
      ]);
      const vip = world.vips("A")?.web;
      expect(vip).toBeDefined();
      expect(world.vips("B")?.web).toBe(vip);

      await deliver(world, [removeDp(world, dp)]);
      expect(world.vips("A")?.web).toBeUndefined();
      expect(world.vips("B")?.web).toBe(vip);
      expect(claimOf(world, "web")?.releasedAt).toBeUndefined();

      await deliver(world, [removeEs(world, es)]);
      expect(claimOf(world, "web")?.releasedAt).toBeDefined();
      expect(world.violations()).toEqual([]);
    });

    it("two external services on one host with different ports share the host's VIP", async () => {
      const world = new World({ mode });
      await deliver(world, [
        mesh(world, "A"),
        putEs(world, externalService("A", "api-v1", "api-v1", "api.example.com:443")),
        putEs(world, externalService("A", "api-v2", "api-v2", "API.example.com.:8443")),
      ]);
      const { services, hosts } = view(world, "A");
      expect(Object.keys(services).sort()).toEqual(["api-v1", "api-v2"]);
      expect(Object.keys(hosts)).toEqual(["api.example.com"]);
      const values = [...Object.values(services), ...Object.values(hosts)];
      expect(new Set(values).size).toBe(3);
      expect(world.violations()).toEqual([]);
    });

    it("a host never collides with a service of the same spelling", async () => {
      const world = new World({ mode });
      await deliver(world, [
        mesh(world, "A"),
        putDp(world, dataplane("A", "dp", ["api.example.com"])),
        putEs(world, externalService("A", "es", "ext", "api.example.com:443")),
      ]);
      const { services, hosts } = view(world, "A");
      expect(services["api.example.com"]).toBeDefined();
      expect(hosts["api.example.com"]).toBeDefined();
      expect(hosts["api.example.com"]).not.toBe(services["api.example.com"]);
      expect(world.violations()).toEqual([]);
    });

    it("disableHostDNSEntry: true and a host that is an IP give no host entry", async () => {
      const world = new World({ mode });
      await deliver(world, [
        mesh(world, "A"),
        putEs(
          world,
          externalService("A", "opt-out", "opted", "db.example.com:5432", {
            disableHostDNSEntry: true,
          }),
        ),
        putEs(world, externalService("A", "v4", "by-ipv4", "192.0.2.10:443")),
        putEs(world, externalService("A", "v6", "by-ipv6", "[2001:db8::1]:443")),
      ]);
      const { services, hosts } = view(world, "A");
      expect(Object.keys(services).sort()).toEqual(["by-ipv4", "by-ipv6", "opted"]);
      expect(hosts).toEqual({});
      expect(world.violations()).toEqual([]);
    });

    it("an external service moved to another mesh takes its service and host along, same VIPs", async () => {
      const world = new World({ mode });
      const before = externalService("A", "pay", "payments", "pay.example.com:443");
      await deliver(world, [mesh(world, "A"), mesh(world, "B"), putEs(world, before)]);
      const service = world.vips("A")?.payments;
      const host = world.vips("A")?.[hostEntry("pay.example.com")];

      // Its key is mesh/name: a move is a delete in A and a put in B.
      await deliver(world, [
        removeEs(world, before),
        putEs(world, externalService("B", "pay", "payments", "pay.example.com:443")),
      ]);
      expect(view(world, "A")).toEqual({ services: {}, hosts: {} });
      expect(world.vips("B")?.payments).toBe(service);
      expect(world.vips("B")?.[hostEntry("pay.example.com")]).toBe(host);
      expect(world.violations()).toEqual([]);
    });

    it("deleting the last external service on a host releases the host's VIP into quarantine", async () => {
      const world = new World({ mode, cidr: "240.0.0.0/29" });
      const one = externalService("A", "one", "one", "shared.example.com:443");
      const two = externalService("A", "two", "two", "shared.example.com:80");
      await deliver(world, [mesh(world, "A"), putEs(world, one), putEs(world, two)]);
      const host = world.vips("A")?.[hostEntry("shared.example.com")];
      expect(host).toBeDefined();

      await deliver(world, [removeEs(world, one)]);
      expect(world.vips("A")?.[hostEntry("shared.example.com")]).toBe(host);

      await deliver(world, [removeEs(world, two)]);
      expect(view(world, "A").hosts).toEqual({});
      expect(claimOf(world, hostEntry("shared.example.com"))?.releasedAt).toBe(world.nowMs);
      // The freed address goes to nobody else during the quarantine.
      await deliver(world, [putDp(world, dataplane("A", "dp", ["s1", "s2", "s3", "s4"]))]);
      expect(Object.values(world.vips("A") ?? {})).not.toContain(host);
      expect(world.violations()).toEqual([]);
    });

    it("bad external services are reported by item and field; the rest of the batch goes on", async () => {
      const world = new World({ mode });
      const bad = (name: string, patch: Record<string, unknown>): ExternalServiceItem => ({
        ...externalService("A", name, name, `${name}.example.com:443`),
        ...patch,
      });
      await deliver(world, [
        mesh(world, "A"),
        putEs(world, bad("no-tag", { tags: {} })),
        putEs(world, bad("bad-tag", { tags: { "kuma.io/service": "a b" } })),
        putEs(world, bad("no-port", { networking: { address: "x.example.com" } })),
        putEs(world, bad("bad-port", { networking: { address: "x.example.com:99999" } })),
        putEs(world, bad("bad-host", { networking: { address: "x..example.com:443" } })),
        putEs(world, bad("v6-bare", { networking: { address: "2001:db8::1:443" } })),
        putEs(world, bad("wrong-type", { type: "Dataplane" })),
        putEs(world, bad("tls-list", { networking: { address: "t.example.com:443", tls: [] } })),
        putEs(world, externalService("A", "good", "good", "good.example.com:443")),
      ]);
      const issues = world.telemetry.issues.filter((issue) => issue.table === "external-services");
      const fields = issues.map((issue) => `${String(issue.key.name)} ${issue.field}`).sort();
      expect(fields).toEqual(
        [
          "bad-host networking.address",
          "bad-port networking.address",
          "bad-tag tags.kuma.io/service",
          "no-port networking.address",
          "no-tag tags.kuma.io/service",
          "tls-list networking.tls",
          "v6-bare networking.address",
          "wrong-type type",
        ].sort(),
      );
      for (const issue of issues) expect(issue.key.mesh).toBe("A");
      // A tls that is not a map is reported and changes nothing else.
      expect(Object.keys(view(world, "A").services).sort()).toEqual(["good", "tls-list"]);
      expect(Object.keys(view(world, "A").hosts).sort()).toEqual([
        "good.example.com",
        "t.example.com",
      ]);
      expect(world.violations()).toEqual([]);
    });
  });
}
