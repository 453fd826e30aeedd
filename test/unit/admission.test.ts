import { describe, expect, it } from "vitest";
import {
  dataplaneRefusals,
  externalServiceRefusals,
  isValidMeshName,
  MAX_MESH_NAME,
  meshNameRefusal,
} from "../../functions/domain/admission.ts";
import { readDataplane } from "../../functions/domain/service-set.ts";
import { heldAddresses } from "../../tools/cli/commands/inspect.ts";
import { parseKumaResources } from "../../tools/cli/kuma-resources.ts";

const dataplane = (inbound: unknown[], extra: Record<string, unknown> = {}) => ({
  type: "Dataplane",
  mesh: "shop",
  name: "dp-1",
  networking: { address: "10.0.0.1", inbound, ...extra },
});

describe("admission: the allocator's own rules, refused at the door", () => {
  it("refuses an inbound without a service tag, which the allocator skips without a word", () => {
    const item = dataplane([{ port: 8080, tags: { app: "web" } }]);

    expect(readDataplane({ mesh: "shop", name: "dp-1", item }).issues).toEqual([]);
    expect(dataplaneRefusals("shop", "dp-1", item)).toEqual([
      {
        field: "networking.inbound[0].tags.kuma.io/service",
        reason:
          "missing: an inbound without a kuma.io/service tag gives no service (the allocator skips it)",
      },
    ]);
  });

  it("takes what the allocator skips by the contract: ignored inbounds, Kuma's serviceless port, gateways", () => {
    const ignored = dataplane([
      { port: 8080, tags: { "kuma.io/service": "web" } },
      { port: 8081, state: "Ignored" },
      { port: 49151 },
    ]);
    const gateway = {
      type: "Dataplane",
      mesh: "shop",
      name: "gw-1",
      networking: { address: "10.0.0.2", gateway: { tags: { "kuma.io/service": "edge" } } },
    };

    expect(dataplaneRefusals("shop", "dp-1", ignored)).toEqual([]);
    expect(dataplaneRefusals("shop", "gw-1", gateway)).toEqual([]);
  });

  it("refuses a dataplane with no inbound that is neither a gateway nor an ingress, and a bad service name", () => {
    expect(dataplaneRefusals("shop", "dp-1", dataplane([]))).toEqual([
      {
        field: "networking.inbound",
        reason:
          "missing: a dataplane that is neither a gateway nor an ingress needs an inbound with a kuma.io/service tag",
      },
    ]);
    expect(
      dataplaneRefusals(
        "shop",
        "dp-1",
        dataplane([{ port: 1, tags: { "kuma.io/service": "a b" } }]),
      ),
    ).toEqual([
      {
        field: "networking.inbound[0].tags.kuma.io/service",
        reason: 'invalid service name "a b": expected 1-253 of [A-Za-z0-9.-_:]',
      },
    ]);
  });

  it("refuses an external service the allocator would not read", () => {
    const item = {
      type: "ExternalService",
      networking: { address: "httpbin.org" },
      tags: { "kuma.io/service": "httpbin" },
    };
    expect(externalServiceRefusals("shop", "httpbin", item)).toEqual([
      {
        field: "networking.address",
        reason: 'no port in "httpbin.org": expected "host:port"',
      },
    ]);
  });

  it("takes mesh names Kuma could export as kuma-<mesh>-dns-vips, and refuses file paths", () => {
    for (const name of ["default", "shop-1", "a", "mesh.prod", "9"]) {
      expect(isValidMeshName(name), name).toBe(true);
    }
    for (const name of ["./mesh.yaml", "Shop", "-shop", "shop-", "a_b", "", "x".repeat(240)]) {
      expect(isValidMeshName(name), name).toBe(false);
    }
    expect(isValidMeshName("x".repeat(MAX_MESH_NAME))).toBe(true);
    expect(`kuma-${"x".repeat(MAX_MESH_NAME)}-dns-vips`).toHaveLength(253);
    expect(meshNameRefusal("./mesh.yaml")?.reason).toBe(
      'invalid mesh name "./mesh.yaml": expected 1-239 of [a-z0-9.-], starting and ending with a letter or digit (a Kubernetes object name, as kuma-<mesh>-dns-vips must be)',
    );
  });
});

describe("Kuma resources of a file", () => {
  it("reads a kubectl list of Kuma's CRDs as the universal documents Kuma's API shows", () => {
    const text = JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: [
        { apiVersion: "kuma.io/v1alpha1", kind: "Mesh", metadata: { name: "payments" }, spec: {} },
        {
          apiVersion: "kuma.io/v1alpha1",
          kind: "Dataplane",
          metadata: { name: "ledger-1", namespace: "money" },
          spec: { networking: { address: "10.0.0.7", inbound: [] } },
        },
        { kind: "ConfigMap", metadata: { name: "other" } },
      ],
    });

    const parsed = parseKumaResources(text, "list.json");

    expect(parsed.resources.map((r) => [r.where, r.type, r.mesh, r.name])).toEqual([
      ["list.json (item 1)", "Mesh", undefined, "payments"],
      ["list.json (item 2)", "Dataplane", "default", "ledger-1.money"],
    ]);
    expect(parsed.resources[1]?.item).toEqual({
      type: "Dataplane",
      name: "ledger-1.money",
      mesh: "default",
      networking: { address: "10.0.0.7", inbound: [] },
    });
    expect(parsed.problems).toEqual([
      {
        where: "list.json (item 3)",
        field: "kind",
        reason: 'must be "Mesh", "Dataplane", "ExternalService", got "ConfigMap"',
      },
    ]);
  });

  it("names the document of a problem, and says when a file holds nothing", () => {
    const parsed = parseKumaResources(
      "type: Mesh\nname: a\n---\ntype: Dataplane\nname: x\n---\n",
      "f.yaml",
    );
    expect(parsed.problems).toEqual([
      { where: "f.yaml (document 2)", field: "mesh", reason: "required (a non-empty string)" },
    ]);
    expect(parseKumaResources("", "empty.yaml").problems).toEqual([
      { where: "empty.yaml", field: undefined, reason: "no resource in it" },
    ]);
  });
});

describe("get quarantine", () => {
  it("lists released and former addresses with when they free, and leaves addresses in use out", () => {
    const hour = 3600;
    const services = new Map([
      ["web", { service: "web", vip: "240.0.0.2", meshes: new Map(), releasedAt: 1_000 }],
      [
        "api",
        {
          service: "api",
          vip: "240.0.0.5",
          meshes: new Map([["m", { incarnation: "i", version: 1 }]]),
          releasedAt: undefined,
        },
      ],
    ]);
    const addresses = [
      { vip: "240.0.0.2", owner: "web", claimId: "a", releasedAt: 1_000 },
      { vip: "240.0.0.5", owner: "api", claimId: "b", releasedAt: undefined },
      {
        vip: "240.0.0.1",
        owner: "api",
        claimId: "c",
        releasedAt: undefined,
        former: true as const,
      },
    ];

    const held = heldAddresses(services, addresses, hour, 1_000 + hour * 1000);

    expect(held).toEqual([
      {
        vip: "240.0.0.2",
        formerOwner: "web",
        state: "released",
        releasedAt: new Date(1_000).toISOString(),
        frees: new Date(1_000 + hour * 1000).toISOString(),
        free: true,
      },
      {
        vip: "240.0.0.1",
        formerOwner: "api",
        state: "former",
        releasedAt: null,
        frees: null,
        free: false,
      },
    ]);
  });
});
