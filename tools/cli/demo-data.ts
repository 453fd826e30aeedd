import type { DataplaneDocument, ExternalServiceDocument } from "./kuma-resources.ts";

/** The demo's meshes and dataplanes: small, but every case the allocator handles. */
export interface DemoData {
  readonly meshes: readonly string[];
  readonly dataplanes: readonly DataplaneDocument[];
  /** Seeded into the external-services table (the local runtime always has it). */
  readonly externalServices: readonly ExternalServiceDocument[];
  /** One line per notable case, printed when seeding. */
  readonly highlights: readonly string[];
}

interface InboundSpec {
  readonly service: string;
  readonly port?: number;
  readonly state?: "Ready" | "NotReady" | "Ignored";
}

function dataplane(
  mesh: string,
  name: string,
  address: string,
  inbound: readonly InboundSpec[],
  extra: Record<string, unknown> = {},
): DataplaneDocument {
  return {
    type: "Dataplane",
    mesh,
    name,
    networking: {
      address,
      inbound: inbound.map((spec) => ({
        port: spec.port ?? 8080,
        servicePort: 80,
        ...(spec.state !== undefined ? { state: spec.state } : {}),
        tags: { "kuma.io/service": spec.service, "kuma.io/protocol": "http", version: "v1" },
      })),
      ...extra,
    },
  };
}

function replicas(
  mesh: string,
  meshIndex: number,
  service: string,
  count: number,
  first: number,
): DataplaneDocument[] {
  return Array.from({ length: count }, (_, i) =>
    dataplane(mesh, `${service}-${i + 1}`, `10.${meshIndex}.0.${first + i}`, [{ service }]),
  );
}

/**
 * Three meshes and fifty dataplanes: replicas of each service; `auth` in both `default` and
 * `payments` (one VIP for both); an ingress stored under `edge` that advertises services of
 * `default` and `payments`; gateways (no VIP); a serviceless pod (port 49151) and an ignored
 * inbound (no VIP either); an external service, `httpbin` in `default`, whose host
 * `httpbin.org` gets a VIP of its own.
 */
export function demoData(): DemoData {
  const dataplanes: DataplaneDocument[] = [
    ...replicas("default", 1, "frontend", 5, 10),
    ...replicas("default", 1, "backend", 6, 20),
    ...replicas("default", 1, "catalog", 4, 30),
    ...replicas("default", 1, "auth", 3, 40),
    ...replicas("default", 1, "redis", 2, 50),
    dataplane("default", "batch-job-1", "10.1.0.60", [{ service: "batch-job", port: 49151 }]),
    ...replicas("payments", 2, "payments-api", 5, 10),
    ...replicas("payments", 2, "ledger", 4, 20),
    ...replicas("payments", 2, "auth", 3, 30),
    ...replicas("edge", 3, "edge-api", 8, 10),
    ...replicas("edge", 3, "metrics", 3, 20),
    dataplane("edge", "legacy-1", "10.3.0.30", [{ service: "legacy", state: "Ignored" }]),
    ...Array.from({ length: 3 }, (_, i) =>
      dataplane("edge", `gateway-${i + 1}`, `10.3.0.${40 + i}`, [], {
        inbound: undefined,
        gateway: { type: "BUILTIN", tags: { "kuma.io/service": "edge-gateway" } },
      }),
    ),
    ...Array.from({ length: 2 }, (_, i) =>
      dataplane("edge", `zone-ingress-${i + 1}`, `10.3.0.${50 + i}`, [], {
        inbound: undefined,
        ingress: {
          publicAddress: `203.0.113.${10 + i}`,
          publicPort: 10001,
          availableServices: [
            { mesh: "default", tags: { "kuma.io/service": "search" }, instances: 2 },
            { mesh: "payments", tags: { "kuma.io/service": "risk-score" }, instances: 1 },
          ],
        },
      }),
    ),
  ];
  return {
    meshes: ["default", "payments", "edge"],
    dataplanes,
    externalServices: [
      {
        type: "ExternalService",
        mesh: "default",
        name: "httpbin",
        networking: { address: "httpbin.org:443", tls: { enabled: true } },
        tags: { "kuma.io/service": "httpbin", "kuma.io/protocol": "http" },
      },
    ],
    highlights: [
      "auth runs in meshes default and payments: one VIP for both",
      "zone ingresses in mesh edge advertise search (mesh default) and risk-score (mesh payments)",
      "gateways, a serviceless pod (port 49151) and an ignored inbound get no VIP",
      "external service httpbin (mesh default, httpbin.org:443): a VIP for the service and one for its host",
    ],
  };
}
