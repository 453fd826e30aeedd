/**
 * The package as consumers install it (decision 080): packed once with `npm pack`, installed into
 * scratch projects in a temporary directory outside the repository, and used from plain `node`
 * (no tsx, no TypeScript loader). The reader reads a mesh the real handler wrote on the local
 * engine.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalEmulator } from "../../functions/local/emulator.ts";
import { createWorld, dataplane, startEmulator, type World } from "../integration/harness.ts";
import { type Packed, packPackage, REPO_ROOT, type Scratch, scratchProject } from "./pack.ts";

let packed: Packed;

beforeAll(async () => {
  packed = await packPackage();
  process.stderr.write(
    `[package] npm pack: ${packed.bytes} bytes, ${packed.files.length} files, ${packed.seconds.toFixed(1)} s (build included)\n`,
  );
}, 120_000);

afterAll(() => {
  packed?.cleanUp();
});

describe("the reader package, installed from the tarball", () => {
  let emulator: LocalEmulator;
  let world: World;
  let scratch: Scratch;

  beforeAll(async () => {
    emulator = await startEmulator();
    world = await createWorld(emulator);
    scratch = await scratchProject(packed.tarball);
    process.stderr.write(`[package] reader scratch install: ${scratch.seconds.toFixed(1)} s\n`);
    await world.putMesh("default");
    await world.putDataplane(
      dataplane("default", "dp-1", [
        { service: "web", port: 8080 },
        { service: "constructor", port: 8081 },
        { service: "__proto__", port: 8082 },
      ]),
    );
    await world.drain();
  }, 120_000);

  afterAll(async () => {
    world?.close();
    scratch?.cleanUp();
    await emulator?.stop();
  });

  it("ships compiled JavaScript with types, not the TypeScript sources", () => {
    expect(packed.files).toContain("dist/functions/reader/index.js");
    expect(packed.files).toContain("dist/functions/reader/index.d.ts");
    expect(packed.files).toContain("dist/reader.cjs");
    expect(packed.files.filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))).toEqual(
      [],
    );
  });

  it("installs only the reader's runtime dependencies", () => {
    const modules = join(scratch.dir, "node_modules");
    expect(existsSync(join(modules, "serverless-vip-allocator/dist/reader.cjs"))).toBe(true);
    for (const needed of ["@aws-sdk/client-dynamodb", "ipaddr.js", "dns-packet"]) {
      expect(existsSync(join(modules, needed)), needed).toBe(true);
    }
    const scoped = readdirSync(modules).filter((name) => name.startsWith("@aws-lambda-powertools"));
    expect(scoped).toEqual([]);
    for (const notNeeded of [
      "yaml",
      "aws-cdk-lib",
      "constructs",
      "esbuild",
      "@aws-sdk/lib-dynamodb",
    ]) {
      expect(existsSync(join(modules, notNeeded)), notNeeded).toBe(false);
    }
  });

  const readMesh = (importLine: string) => `${importLine}
const client = new DynamoDBClient({
  endpoint: process.env.DYNAMODB_ENDPOINT,
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
});
const reader = new VipReader({ client, table: process.env.VIPS_TABLE });
const main = async () => {
  await reader.refresh();
  const view = reader.get("default");
  console.log(JSON.stringify({
    meshes: reader.meshes(),
    version: view.version,
    vips: [...view.vips].sort(),
    constructor: reader.lookup("constructor")?.vip,
  }));
};
main().catch((error) => { console.error(error); process.exit(1); });
`;

  async function expected(): Promise<unknown> {
    const item = await world.vipItem("default");
    const vips = new Map(Object.entries(item?.vips ?? {}));
    return {
      meshes: ["default"],
      version: item?.version,
      vips: [...vips].sort(),
      constructor: vips.get("constructor"),
    };
  }

  it("reads a mesh from plain node as an ES module", async () => {
    const file = scratch.write(
      "read.mjs",
      readMesh(
        'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";\nimport { VipReader } from "serverless-vip-allocator/reader";',
      ),
    );
    const out = await scratch.node(file, {
      DYNAMODB_ENDPOINT: emulator.endpoint,
      VIPS_TABLE: world.tables.vips,
    });
    const result = JSON.parse(out) as { vips: unknown[] };
    expect(result.vips).toHaveLength(3);
    expect(result).toEqual(await expected());
  });

  it("reads a mesh from plain node as CommonJS", async () => {
    const file = scratch.write(
      "read.cjs",
      readMesh(
        'const { DynamoDBClient } = require("@aws-sdk/client-dynamodb");\nconst { VipReader } = require("serverless-vip-allocator/reader");',
      ),
    );
    const out = await scratch.node(file, {
      DYNAMODB_ENDPOINT: emulator.endpoint,
      VIPS_TABLE: world.tables.vips,
    });
    expect(JSON.parse(out)).toEqual(await expected());
  });

  it("type-checks a TypeScript consumer against the shipped .d.ts (NodeNext)", async () => {
    scratch.write(
      "consumer.ts",
      [
        'import { DynamoDBClient } from "@aws-sdk/client-dynamodb";',
        'import { VipReader, type MeshView } from "serverless-vip-allocator/reader";',
        "const reader = new VipReader({ client: new DynamoDBClient({}) });",
        'const view: MeshView | undefined = reader.get("default");',
        'const vip: string | undefined = view?.vips.get("web");',
        "// @ts-expect-error: get takes a mesh name",
        "reader.get(1);",
        "export { vip };",
        "",
      ].join("\n"),
    );
    scratch.write(
      "tsconfig.json",
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          strict: true,
          noEmit: true,
          // A Node service has @types/node; the repository's copy stands in for it.
          typeRoots: [join(REPO_ROOT, "node_modules/@types")],
          types: ["node"],
          skipLibCheck: true,
        },
        files: ["consumer.ts"],
      }),
    );
    const out = await scratch
      .node(join(REPO_ROOT, "node_modules/typescript/bin/tsc"), {})
      .catch((error: { stdout?: string }) => `tsc failed:\n${error.stdout ?? String(error)}`);
    expect(out).toBe("");
  });
});
