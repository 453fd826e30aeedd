import { describe, expect, it } from "vitest";
import {
  DATAPLANES,
  deriveServiceSet,
  isValidServiceName,
  MAX_TAGS,
  meshesTouchedBy,
  readDataplane,
  SERVICE_TAG,
} from "../../functions/domain/service-set.ts";
import type { DataplaneRecord } from "../../functions/domain/types.ts";
import {
  type DataplaneItem,
  dataplane,
  gateway,
  ingress,
  recordOf,
  withNetworking,
} from "../fixtures/builders.ts";

/** What a MeshSource gives for `mesh`: its own items, and every ingress of any mesh. */
function serviceSetOf(mesh: string, items: readonly DataplaneItem[]) {
  const records = items.map(recordOf);
  const own = records.filter((record) => record.mesh === mesh);
  const ingresses = records.filter((record) => isIngressItem(record));
  return deriveServiceSet(mesh, own, ingresses);
}

function isIngressItem(record: DataplaneRecord): boolean {
  const networking = (record.item as { networking?: unknown }).networking;
  return typeof networking === "object" && networking !== null && "ingress" in networking;
}

const kumaExample: DataplaneItem[] = [
  dataplane("mesh-1", "dp-backend", ["backend"]),
  dataplane("mesh-1", "dp-frontend-1", ["frontend"]),
  dataplane("mesh-1", "dp-frontend-2", ["frontend"]),
  dataplane("mesh-1", "dp-db", ["database", "metrics"]),
  dataplane("mesh-2", "dp-another", ["another-mesh-svc"]),
  ingress("mesh-1", "zone-ingress", [
    { mesh: "mesh-1", service: "ingress-svc" },
    { mesh: "mesh-2", service: "another-mesh-ingress-svc" },
  ]),
];

describe("deriveServiceSet", () => {
  it("derives Kuma's example service set of mesh-1", () => {
    // Act
    const { services, issues } = serviceSetOf("mesh-1", kumaExample);

    // Assert
    expect(services).toEqual(["backend", "database", "frontend", "ingress-svc", "metrics"]);
    expect(issues).toEqual([]);
  });

  it("derives Kuma's example service set of mesh-2, ingress services included", () => {
    // Act
    const { services, issues } = serviceSetOf("mesh-2", kumaExample);

    // Assert
    expect(services).toEqual(["another-mesh-ingress-svc", "another-mesh-svc"]);
    expect(issues).toEqual([]);
  });

  it("counts an ingress stored under mesh-x for the mesh its available service names", () => {
    // Arrange
    const items = [
      ingress("mesh-x", "ingress-x", [{ mesh: "mesh-y", service: "payments" }]),
      dataplane("mesh-y", "dp-1", ["web"]),
    ];

    // Act
    const forY = serviceSetOf("mesh-y", items);
    const forX = serviceSetOf("mesh-x", items);

    // Assert
    expect(forY.services).toEqual(["payments", "web"]);
    expect(forX.services).toEqual([]);
  });

  it("does not count the inbounds of an ingress as services", () => {
    // Arrange
    const items = [
      ingress("mesh-1", "ingress", [{ mesh: "mesh-1", service: "offered" }], ["ingress-inbound"]),
    ];

    // Act
    const { services } = serviceSetOf("mesh-1", items);

    // Assert
    expect(services).toEqual(["offered"]);
  });

  it("does not count gateway tags as services", () => {
    // Arrange
    const items = [gateway("mesh-1", "edge", "edge-gateway"), dataplane("mesh-1", "dp", ["web"])];

    // Act
    const { services, issues } = serviceSetOf("mesh-1", items);

    // Assert
    expect(services).toEqual(["web"]);
    expect(issues).toEqual([]);
  });

  it("ignores the dataplanes of other meshes", () => {
    // Arrange
    const own = [recordOf(dataplane("mesh-1", "dp", ["web"]))];
    const foreign = [recordOf(dataplane("mesh-2", "dp", ["db"]))];

    // Act
    const { services } = deriveServiceSet("mesh-1", own, foreign);

    // Assert
    expect(services).toEqual(["web"]);
  });

  it("counts an ingress stored under the mesh once, though both lists hold it", () => {
    // Arrange
    const item = ingress("mesh-1", "ingress", [
      { mesh: "mesh-1", service: "svc" },
      { mesh: "mesh-1", service: 42 },
    ]);

    // Act
    const { services, issues } = deriveServiceSet("mesh-1", [recordOf(item)], [recordOf(item)]);

    // Assert
    expect(services).toEqual(["svc"]);
    expect(issues).toHaveLength(1);
  });

  it("returns the set sorted by code unit and deduplicated", () => {
    // Arrange
    const items = [
      dataplane("m", "dp-1", ["web", "Api", "api", "web"]),
      dataplane("m", "dp-2", ["api", "_internal", "9-lives"]),
      ingress("other", "ingress", [{ mesh: "m", service: "web" }]),
    ];

    // Act
    const { services } = serviceSetOf("m", items);

    // Assert
    expect(services).toEqual(["9-lives", "Api", "_internal", "api", "web"]);
  });

  it.each([
    { why: "state Ignored", inbound: { service: "skipped", state: "Ignored" as const } },
    { why: "port 49151 (a serviceless pod)", inbound: { service: "skipped", port: 49151 } },
    { why: "no service tag", inbound: { tags: { "kuma.io/protocol": "http" } } },
    { why: "no tags at all", inbound: {} },
  ])("skips an inbound with $why and reports no issue", ({ inbound }) => {
    // Arrange
    const items = [dataplane("m", "dp", [inbound, "kept"])];

    // Act
    const { services, issues } = serviceSetOf("m", items);

    // Assert
    expect(services).toEqual(["kept"]);
    expect(issues).toEqual([]);
  });

  it("counts inbounds in state Ready and NotReady", () => {
    // Arrange
    const items = [
      dataplane("m", "dp", [
        { service: "ready", state: "Ready" },
        { service: "not-ready", state: "NotReady" },
      ]),
    ];

    // Act
    const { services } = serviceSetOf("m", items);

    // Assert
    expect(services).toEqual(["not-ready", "ready"]);
  });

  it("accepts a 253-character service name from Kuma's character set", () => {
    // Arrange
    const name = `web_kuma-demo_svc_8080.a:${"x".repeat(228)}`;
    const items = [dataplane("m", "dp", [name])];

    // Act
    const { services, issues } = serviceSetOf("m", items);

    // Assert
    expect(name).toHaveLength(253);
    expect(services).toEqual([name]);
    expect(issues).toEqual([]);
  });
});

describe("readDataplane with bad input", () => {
  const key = { mesh: "m", name: "dp" };

  it.each([
    { why: "not a string", service: 42, reason: /not a string/ },
    { why: "a list", service: ["web"], reason: /not a string \(list\)/ },
    { why: "of invalid characters", service: "web svc!", reason: /invalid service name/ },
    { why: "254 characters long", service: "s".repeat(254), reason: /invalid service name/ },
    { why: "empty", service: "", reason: /invalid service name/ },
  ])(
    "skips an inbound whose service tag is $why, naming table, key, field and reason",
    ({ service, reason }) => {
      // Arrange
      const item = dataplane("m", "dp", ["good-before", { service }, "good-after"]);

      // Act
      const result = readDataplane(recordOf(item));

      // Assert
      expect(result.services.get("m")).toEqual(new Set(["good-after", "good-before"]));
      expect(result.issues).toHaveLength(1);
      const [issue] = result.issues;
      expect(issue).toMatchObject({
        table: DATAPLANES,
        key,
        field: `networking.inbound[1].tags.${SERVICE_TAG}`,
      });
      expect(issue?.reason).toMatch(reason);
    },
  );

  it("skips an inbound with more than MAX_TAGS tags and keeps the rest", () => {
    // Arrange
    const tags = Object.fromEntries(
      Array.from({ length: MAX_TAGS + 1 }, (_, i) => [`tag-${i}`, "v"]),
    );
    const item = dataplane("m", "dp", [{ service: "huge", tags }, "small"]);

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.get("m")).toEqual(new Set(["small"]));
    expect(result.issues).toEqual([
      {
        table: DATAPLANES,
        key,
        field: "networking.inbound[0].tags",
        reason: `oversized tag map: ${MAX_TAGS + 2} tags, at most ${MAX_TAGS}`,
      },
    ]);
  });

  it("accepts a tag map of exactly MAX_TAGS tags", () => {
    // Arrange
    const tags = Object.fromEntries(
      Array.from({ length: MAX_TAGS - 1 }, (_, i) => [`tag-${i}`, "v"]),
    );
    const item = dataplane("m", "dp", [{ service: "wide", tags }]);

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.get("m")).toEqual(new Set(["wide"]));
    expect(result.issues).toEqual([]);
  });

  it("reports tags that are not a map and keeps the other inbounds", () => {
    // Arrange
    const item = dataplane("m", "dp", [{ tags: "kuma.io/service=web" }, "other"]);

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.get("m")).toEqual(new Set(["other"]));
    expect(result.issues).toEqual([
      { table: DATAPLANES, key, field: "networking.inbound[0].tags", reason: "not a map" },
    ]);
  });

  it("reports an inbound entry that is not a map and keeps the other inbounds", () => {
    // Arrange
    const item = withNetworking(dataplane("m", "dp", []), {
      inbound: ["web", { port: 1, tags: { [SERVICE_TAG]: "ok" } }],
    });

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.get("m")).toEqual(new Set(["ok"]));
    expect(result.issues).toEqual([
      { table: DATAPLANES, key, field: "networking.inbound[0]", reason: "not a map" },
    ]);
  });

  it("contributes nothing when inbound is not a list", () => {
    // Arrange
    const item = withNetworking(dataplane("m", "dp", []), {
      inbound: { port: 1, tags: { [SERVICE_TAG]: "web" } },
    });

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.size).toBe(0);
    expect(result.issues).toEqual([
      { table: DATAPLANES, key, field: "networking.inbound", reason: "not a list" },
    ]);
  });

  it.each([
    { why: "missing", networking: undefined, reason: "missing" },
    { why: "a string", networking: "10.0.0.1", reason: "not a map" },
    { why: "a list", networking: [{ inbound: [] }], reason: "not a map" },
    { why: "null", networking: null, reason: "not a map" },
  ])("contributes nothing when networking is $why", ({ networking, reason }) => {
    // Arrange
    const item = { mesh: "m", name: "dp", ...(networking === undefined ? {} : { networking }) };

    // Act
    const result = readDataplane({ mesh: "m", name: "dp", item });

    // Assert
    expect(result.services.size).toBe(0);
    expect(result.issues).toEqual([{ table: DATAPLANES, key, field: "networking", reason }]);
  });

  it("contributes nothing when the item is not a map", () => {
    // Act
    const result = readDataplane({ mesh: "m", name: "dp", item: "garbage" });

    // Assert
    expect(result.services.size).toBe(0);
    expect(result.issues).toEqual([
      { table: DATAPLANES, key, field: "(item)", reason: "not a map" },
    ]);
  });

  it("contributes nothing when ingress is not a map", () => {
    // Arrange
    const item = withNetworking(dataplane("m", "dp", []), {
      inbound: [{ port: 1, tags: { [SERVICE_TAG]: "web" } }],
      ingress: "yes",
    });

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.size).toBe(0);
    expect(result.issues).toEqual([
      { table: DATAPLANES, key, field: "networking.ingress", reason: "not a map" },
    ]);
  });

  it("contributes nothing when availableServices is not a list", () => {
    // Arrange
    const item = withNetworking(dataplane("m", "dp", []), {
      ingress: { availableServices: { mesh: "m", tags: { [SERVICE_TAG]: "x" } } },
    });

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.size).toBe(0);
    expect(result.issues).toEqual([
      {
        table: DATAPLANES,
        key,
        field: "networking.ingress.availableServices",
        reason: "not a list",
      },
    ]);
  });

  it.each([
    { why: "without mesh", entry: { service: "lost" }, reason: "missing" },
    {
      why: "with an empty mesh",
      entry: { mesh: "", service: "lost" },
      reason: "not a non-empty string",
    },
    {
      why: "with a numeric mesh",
      entry: { mesh: 7, service: "lost" },
      reason: "not a non-empty string",
    },
  ])("skips an available service $why and keeps the others", ({ entry, reason }) => {
    // Arrange
    const item = ingress("m", "dp", [entry, { mesh: "other", service: "kept" }]);

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.isIngress).toBe(true);
    expect([...result.services.keys()]).toEqual(["other"]);
    expect(result.services.get("other")).toEqual(new Set(["kept"]));
    expect(result.issues).toEqual([
      {
        table: DATAPLANES,
        key,
        field: "networking.ingress.availableServices[0].mesh",
        reason,
      },
    ]);
  });

  it("reports an available service without a service tag", () => {
    // Arrange
    const item = ingress("m", "dp", [{ mesh: "m", tags: { zone: "east" } }]);

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.size).toBe(0);
    expect(result.issues).toEqual([
      {
        table: DATAPLANES,
        key,
        field: `networking.ingress.availableServices[0].tags.${SERVICE_TAG}`,
        reason: "missing",
      },
    ]);
  });

  it("reports an available service with an invalid service name", () => {
    // Arrange
    const item = ingress("m", "dp", [
      { mesh: "m", service: "bad name" },
      { mesh: "m", service: "good" },
    ]);

    // Act
    const result = readDataplane(recordOf(item));

    // Assert
    expect(result.services.get("m")).toEqual(new Set(["good"]));
    expect(result.issues).toHaveLength(1);
    expect(result.issues[0]).toMatchObject({
      table: DATAPLANES,
      key,
      field: `networking.ingress.availableServices[0].tags.${SERVICE_TAG}`,
    });
    expect(result.issues[0]?.reason).toMatch(/invalid service name "bad name"/);
  });

  it("reports the issues of a mesh's own bad dataplane through deriveServiceSet", () => {
    // Arrange
    const items = [dataplane("m", "bad", [{ service: 1 }]), dataplane("m", "good", ["web"])];

    // Act
    const { services, issues } = serviceSetOf("m", items);

    // Assert
    expect(services).toEqual(["web"]);
    expect(issues).toHaveLength(1);
    expect(issues[0]?.key).toEqual({ mesh: "m", name: "bad" });
  });
});

describe("isValidServiceName", () => {
  it.each(["backend", "web_kuma-demo_svc_8080", "a.b:c", "x".repeat(253)])("accepts %j", (name) => {
    expect(isValidServiceName(name)).toBe(true);
  });

  it.each(["", "x".repeat(254), "a b", "a/b", "é", "a\n", 7, null, undefined])(
    "rejects %j",
    (name) => {
      expect(isValidServiceName(name)).toBe(false);
    },
  );
});

describe("meshesTouchedBy", () => {
  it("gives the mesh a plain dataplane is stored under", () => {
    // Act
    const meshes = meshesTouchedBy(dataplane("mesh-1", "dp", ["web"]));

    // Assert
    expect(meshes).toEqual(["mesh-1"]);
  });

  it("gives an ingress's own mesh and every mesh its available services name", () => {
    // Arrange
    const item = ingress("mesh-1", "ingress", [
      { mesh: "mesh-2", service: "a" },
      { mesh: "mesh-3", service: "b" },
      { mesh: "mesh-2", service: "c" },
      { service: "no-mesh" },
    ]);

    // Act
    const meshes = meshesTouchedBy(item);

    // Assert
    expect(meshes.sort()).toEqual(["mesh-1", "mesh-2", "mesh-3"]);
  });

  it.each([
    { why: "undefined", image: undefined },
    { why: "a string", image: "mesh-1" },
    { why: "a list", image: ["mesh-1"] },
    { why: "a map without mesh", image: { name: "dp" } },
    { why: "a map with an empty mesh", image: { mesh: "" } },
  ])("gives no mesh for $why", ({ image }) => {
    // Act
    const meshes = meshesTouchedBy(image);

    // Assert
    expect(meshes).toEqual([]);
  });

  it("tolerates a malformed ingress and still gives the stored mesh", () => {
    // Arrange
    const image = { mesh: "m", networking: { ingress: { availableServices: "everything" } } };

    // Act
    const meshes = meshesTouchedBy(image);

    // Assert
    expect(meshes).toEqual(["m"]);
  });
});
