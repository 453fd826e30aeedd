/**
 * `ClaimsPort.adopt` (store/claim-writes.ts) on both implementations of the claims port: the
 * in-memory double and the DynamoDB adapter on the local engine, so the double cannot drift.
 */
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { joinMesh } from "../../functions/allocator/pass/memberships.ts";
import { ClaimStoreLogic } from "../../functions/store/claim-store-logic.ts";
import { createTables } from "../../functions/store/create-tables.ts";
import { DynamoClaimTable } from "../../functions/store/dynamo-claim-table.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import type { ClaimStore } from "../../functions/store/ports.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { startTestEngine } from "../fixtures/engine.ts";
import { InMemoryClaimStore, sequentialIds } from "../fixtures/in-memory-ports.ts";

let emulator: LocalEmulator;
let client: DynamoDBClient;
let counter = 0;

beforeAll(async () => {
  emulator = await startTestEngine();
  client = new DynamoDBClient({
    endpoint: emulator.endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
});

afterAll(async () => {
  client?.destroy();
  await emulator?.stop();
});

const IMPLEMENTATIONS: Array<[string, () => Promise<ClaimStore>]> = [
  ["in memory", async () => new InMemoryClaimStore()],
  [
    "DynamoDB adapter on the local engine",
    async () => {
      counter += 1;
      const prefix = `adopt-store-${process.pid}-${counter}`;
      const tables = {
        meshes: `${prefix}-meshes`,
        dataplanes: `${prefix}-dataplanes`,
        vips: `${prefix}-vips`,
        claims: `${prefix}-claims`,
        index: `${prefix}-index`,
      };
      await createTables(client, tables);
      return new ClaimStoreLogic(
        new DynamoClaimTable(new DynamoItemClient(client), tables.claims),
        sequentialIds("c"),
      );
    },
  ],
];

describe.each(IMPLEMENTATIONS)("ClaimsPort.adopt: %s", (_name, make) => {
  it("writes the service and the address claim together, with no membership, and neither when one is taken", async () => {
    const claims = await make();

    const first = await claims.adopt({ service: "__proto__", vip: "240.0.0.1", nowMs: 5 });
    const addressTaken = await claims.adopt({ service: "web", vip: "240.0.0.1", nowMs: 6 });
    const serviceTaken = await claims.adopt({ service: "__proto__", vip: "240.0.0.2", nowMs: 7 });

    expect([first, addressTaken, serviceTaken]).toEqual(["ok", "address-taken", "service-changed"]);
    const services = await claims.getServices(["__proto__", "web"]);
    expect([...services.keys()]).toEqual(["__proto__"]);
    expect(services.get("__proto__")).toMatchObject({ vip: "240.0.0.1", releasedAt: undefined });
    expect(services.get("__proto__")?.meshes.size).toBe(0);
    const addresses = await claims.getAddresses(["240.0.0.1", "240.0.0.2"]);
    expect([...addresses.values()].map((a) => [a.vip, a.owner])).toEqual([
      ["240.0.0.1", "__proto__"],
    ]);
  });

  it("an adopted claim is joined by a mesh as any claim, and released like one", async () => {
    const claims = await make();
    await claims.adopt({ service: "web", vip: "240.0.0.1", nowMs: 5 });

    const joined = await joinMesh(claims, {
      service: "web",
      vip: "240.0.0.1",
      mesh: "constructor",
      membership: { incarnation: "i", version: 1 },
      resume: false,
    });
    await claims.adopt({ service: "api", vip: "240.0.0.2", nowMs: 5 });
    const released = await claims.release({ service: "api", vip: "240.0.0.2", nowMs: 9 });
    const notReleased = await claims.release({ service: "web", vip: "240.0.0.1", nowMs: 9 });

    expect(joined).toBe(true);
    expect([released, notReleased]).toEqual([true, false]);
    const after = await claims.getServices(["web", "api"]);
    expect([...(after.get("web")?.meshes.keys() ?? [])]).toEqual(["constructor"]);
    expect(after.get("api")?.releasedAt).toBe(9);
    expect((await claims.getAddresses(["240.0.0.2"])).get("240.0.0.2")?.releasedAt).toBe(9);
  });
});
