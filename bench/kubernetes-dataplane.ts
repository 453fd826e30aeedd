import type { DataplaneItem } from "../test/fixtures/builders.ts";

/**
 * A dataplane the size Kuma stores on Kubernetes (about 800 bytes as a DynamoDB item): one
 * inbound with the tags Kuma sets there, an admin port, transparent proxying, labels.
 */
export function kubernetesDataplane(
  mesh: string,
  name: string,
  service: string,
  version = "v1",
): DataplaneItem {
  const tags = {
    "kuma.io/service": service,
    "kuma.io/protocol": "http",
    "kuma.io/zone": "zone-1",
    "k8s.kuma.io/namespace": "shop",
    "k8s.kuma.io/service-name": service,
    "k8s.kuma.io/service-port": "8080",
    app: service,
    "pod-template-hash": "5d8f9c7b6d",
    version,
  };
  return {
    type: "Dataplane",
    mesh,
    name,
    creationTime: "2026-11-30T08:12:44Z",
    modificationTime: "2026-11-30T08:12:44Z",
    labels: { "k8s.kuma.io/namespace": "shop", "kuma.io/zone": "zone-1", app: service },
    networking: {
      address: "10.244.12.34",
      admin: { port: 9901 },
      inbound: [{ port: 8080, servicePort: 8080, tags }],
      transparentProxying: {
        redirectPortInbound: 15006,
        redirectPortOutbound: 15001,
        ipFamilyMode: "DualStack",
      },
    },
  };
}
