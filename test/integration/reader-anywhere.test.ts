/**
 * Readers anywhere, on the local engine: the Node reader reads through its region, endpoint and
 * credentials options (no client of the caller's), and reads the table of the region it is
 * given (a replica stands in as a copy of the vips table created in eu-west-1: moto keeps one
 * database per region, DynamoDB Local one for all); the Python reader, given the same options,
 * answers every lookup (services, VIPs, and the host of an external service the handler
 * allocated) exactly as the Node reader does on the same live items.
 */
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import {
  CreateTableCommand,
  DynamoDBClient,
  PutItemCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import { PutCommand } from "@aws-sdk/lib-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VipReader, VipReaderError } from "../../functions/reader/index.ts";
import { createTableInput } from "../../functions/store/create-tables.ts";
import { EXTERNAL_SERVICES_TABLE, VIPS_TABLE } from "../../functions/store/table-definitions.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { externalService } from "../fixtures/builders.ts";
import { pythonAnswers, snapshotAnswers } from "../fixtures/reader-answers.ts";
import { createWorld, dataplane, startEmulator, type World } from "./harness.ts";

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL("../../examples/python/vip_reader.py", import.meta.url));
const LOCAL = { accessKeyId: "local", secretAccessKey: "local" };

let emulator: LocalEmulator;
let world: World;

beforeAll(async () => {
  emulator = await startEmulator();
  world = await createWorld(emulator, {
    [EXTERNAL_SERVICES_TABLE.envVar]: `ra${process.pid}-external-services`,
  });
  await world.putMesh("default");
  await world.putMesh("payments");
  await world.putDataplane(dataplane("default", "dp-1", ["web", "__proto__"]));
  await world.putDataplane(dataplane("payments", "dp-2", ["web", "ledger"]));
  for (const [mesh, name] of [
    ["default", "httpbin"],
    ["payments", "httpbin-too"],
  ] as const) {
    await world.doc.send(
      new PutCommand({
        TableName: world.tables.externalServices as string,
        Item: externalService(mesh, name, `${name}_svc`, "HTTPBIN.org:443"),
      }),
    );
  }
  await world.drain();
}, 180_000);

afterAll(async () => {
  world?.close();
  await emulator?.stop();
});

async function python(...args: string[]): Promise<string> {
  const { stdout } = await run("python3", [SCRIPT, ...args], { maxBuffer: 64 * 1024 * 1024 });
  return stdout;
}

describe("readers anywhere, on the local engine", { timeout: 120_000 }, () => {
  it("the Node reader reads through region, endpoint and credentials, hosts included", async () => {
    const reader = new VipReader({
      table: world.tables.vips,
      region: "us-east-1",
      endpoint: emulator.endpoint,
      credentials: LOCAL,
    });
    expect(await reader.client.config.region()).toBe("us-east-1");
    await reader.refresh();
    expect(reader.meshes()).toEqual(["default", "payments"]);
    const item = await world.vipItem("default");
    const httpbin = reader.lookupHost("httpbin.org");
    expect(httpbin?.meshes).toEqual(["default", "payments"]);
    expect(httpbin?.vip).toBe(item?.vips["host/httpbin.org"]);
    expect(reader.reverseHost(httpbin?.vip as string)?.host).toBe("httpbin.org");
    // The host is apart from services: no service of that name, and its VIP is no service's.
    expect(reader.lookup("httpbin.org")).toBeUndefined();
    expect(reader.reverse(httpbin?.vip as string)).toBeUndefined();
    expect(reader.lookup("web")?.meshes).toEqual(["default", "payments"]);
  });

  it("refuses a client together with region or endpoint, and a bad endpoint", () => {
    const client = new DynamoDBClient({ region: "us-east-1", endpoint: emulator.endpoint });
    const thrown = (build: () => unknown): VipReaderError => {
      try {
        build();
      } catch (error) {
        if (error instanceof VipReaderError) return error;
        throw error;
      }
      throw new Error("expected a VipReaderError");
    };
    const both = thrown(() => new VipReader({ client, region: "eu-west-1" }));
    expect(both.code).toBe("INVALID_OPTIONS");
    expect(both.message).toMatch(/give a client, or region .*not both/);
    expect(thrown(() => new VipReader({ endpoint: "localhost:8000" })).message).toMatch(
      /endpoint "localhost:8000" is not an http\(s\) URL/,
    );
    expect(thrown(() => new VipReader({ region: "EU West" })).code).toBe("INVALID_OPTIONS");
  });

  it("reads the table of the region it is given (a copy in eu-west-1 stands in for a replica)", async () => {
    const replicaName = `${world.tables.vips}-replica`;
    const inEurope = new DynamoDBClient({
      region: "eu-west-1",
      endpoint: emulator.endpoint,
      credentials: LOCAL,
    });
    await inEurope.send(new CreateTableCommand(createTableInput(VIPS_TABLE, replicaName)));
    const items = await world.client.send(new ScanCommand({ TableName: world.tables.vips }));
    expect(items.Items).toHaveLength(2);
    for (const item of items.Items ?? []) {
      await inEurope.send(new PutItemCommand({ TableName: replicaName, Item: item }));
    }
    const reader = new VipReader({
      table: replicaName,
      region: "eu-west-1",
      endpoint: emulator.endpoint,
      credentials: LOCAL,
    });
    expect(await reader.client.config.region()).toBe("eu-west-1");
    await reader.refresh();
    expect(reader.lastRefresh.probeRequests).toBeGreaterThan(0);
    expect(reader.meshes()).toEqual(["default", "payments"]);
    expect(reader.lookupHost("httpbin.org")?.meshes).toEqual(["default", "payments"]);
    if (emulator.engine === "moto") {
      // moto keeps one database per region: the home region has no such table.
      const home = new VipReader({
        table: replicaName,
        region: "us-east-1",
        endpoint: emulator.endpoint,
        credentials: LOCAL,
      });
      await expect(home.refresh()).rejects.toMatchObject({ code: "TABLE_NOT_FOUND" });
    }

    // The Python reader in the same region answers as the Node reader does.
    const py = await python(
      "answers",
      "--table",
      replicaName,
      "--endpoint",
      emulator.endpoint,
      "--region",
      "eu-west-1",
    );
    expect(pythonAnswers(py)).toEqual(snapshotAnswers(reader.snapshot));
  });

  it("the Python reader resolves the live host and answers every lookup as the Node reader does", async () => {
    const node = new VipReader({
      table: world.tables.vips,
      region: "us-east-1",
      endpoint: emulator.endpoint,
      credentials: LOCAL,
    });
    await node.refresh();
    const answers = snapshotAnswers(node.snapshot);
    const py = pythonAnswers(
      await python("answers", "--table", world.tables.vips, "--endpoint", emulator.endpoint),
    );
    expect(py).toEqual(answers);
    const hosts = new Map(py.hosts);
    expect(hosts.get("httpbin.org")).toEqual({
      host: "httpbin.org",
      vip: node.lookupHost("httpbin.org")?.vip,
      meshes: ["default", "payments"],
    });
    expect(new Map(py.services).has("__proto__")).toBe(true);
    expect(new Map(py.services).has("httpbin_svc")).toBe(true);
    expect(py.hostVips).toHaveLength(1);
  });
});
