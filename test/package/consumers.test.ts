/**
 * The package as consumers install it (decision 080): packed once with `npm pack`, installed into
 * scratch projects in a temporary directory outside the repository, and used from plain `node`
 * (no tsx, no TypeScript loader). The reader reads a mesh the real handler wrote on the local
 * engine.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { App, Stack } from "aws-cdk-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VipAllocator } from "../../infra/vip-allocator.ts";
import { backfillHandlerCode } from "../../infra/vip-allocator-backfill.ts";
import type { LocalEmulator } from "../../tools/local/emulator.ts";
import { createWorld, dataplane, startEmulator, type World } from "../integration/harness.ts";
import { type Packed, packPackage, REPO_ROOT, type Scratch, scratchProject } from "./pack.ts";

let packed: Packed;

beforeAll(async () => {
  packed = await packPackage();
  process.stderr.write(
    `[package] npm pack: ${packed.bytes} bytes, ${packed.files.length} files, ${packed.seconds.toFixed(1)} s (build included)\n`,
  );
}, 300_000);

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
  }, 300_000);

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
  }, 180_000);
});

/** The construct library's pinned versions this repository tests (its devDependencies). */
const CDK_PACKAGES = ["aws-cdk-lib@2.276.0", "constructs@10.8.1", "cdk-nag@3.0.2"];

const STREAM = (table: string) =>
  `arn:aws:dynamodb:eu-west-1:123456789012:table/${table}/stream/2026-01-01T00:00:00.000`;

/** The scratch CDK app: plain JavaScript, two allocators in one stack, cdk-nag at synth. */
const CDK_APP = `import { App, Stack, Validations } from "aws-cdk-lib";
import { Queue } from "aws-cdk-lib/aws-sqs";
import { AwsSolutionsChecks } from "cdk-nag";
import { VipAllocator } from "serverless-vip-allocator/cdk";

const app = new App({ outdir: process.env.CDK_OUTDIR });
const platform = new Stack(app, "Platform");
new VipAllocator(platform, "Blue", { serviceName: "vips-blue" });
new VipAllocator(platform, "Green", {
  serviceName: "vips-green",
  vipCidr: "10.64.0.0/12",
  memorySize: 1024,
  logLevel: "WARN",
});
const existing = new Stack(app, "Existing");
new VipAllocator(existing, "OnExistingTables", {
  existingMeshesTable: { tableStreamArn: ${JSON.stringify(STREAM("kuma-meshes"))} },
  existingDataplanesTable: { tableStreamArn: ${JSON.stringify(STREAM("kuma-dataplanes"))} },
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
const findings = (scope) =>
  new AwsSolutionsChecks().validateScope(scope).violations.map((v) => v.ruleName);
// The same checks on a queue without encryption or TLS: they do find things in this install.
const probe = new Stack(new App(), "Probe");
new Queue(probe, "Plain");
app.synth();
console.log(JSON.stringify({ findings: findings(app), probeFindings: findings(probe) }));
`;

interface Template {
  Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
}

describe("the construct library, installed from the tarball into a scratch CDK app", () => {
  let scratch: Scratch;
  let outdir: string;
  let repoOutdir: string;
  let nag: { findings: string[]; probeFindings: string[] };
  let platform: Template;
  let repoTemplate: Template;

  const read = (dir: string, file: string): Template =>
    JSON.parse(readFileSync(join(dir, file), "utf8")) as Template;
  const ofType = (template: Template, type: string) =>
    Object.entries(template.Resources).filter(([, resource]) => resource.Type === type);

  beforeAll(async () => {
    const installing = scratchProject(packed.tarball, CDK_PACKAGES);
    // Meanwhile, this repository's own construct (NodejsFunction, bundled by esbuild now), with
    // the feature flags of cdk.json, for the comparison below.
    repoOutdir = mkdtempSync(join(tmpdir(), "vips-repo-synth-"));
    const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")) as {
      context: Record<string, unknown>;
    };
    const app = new App({ outdir: repoOutdir, context: cdkJson.context });
    new VipAllocator(new Stack(app, "Platform"), "Blue", { serviceName: "vips-blue" });
    app.synth();
    repoTemplate = read(repoOutdir, "Platform.template.json");

    scratch = await installing;
    outdir = join(scratch.dir, "cdk.out");
    process.stderr.write(`[package] CDK scratch install: ${scratch.seconds.toFixed(1)} s\n`);
    const started = Date.now();
    const app2 = scratch.write("app.mjs", CDK_APP);
    // Only node's own directory on PATH: no esbuild, no Docker to fall back on.
    const out = await scratch.node(app2, { CDK_OUTDIR: outdir, PATH: dirname(process.execPath) });
    process.stderr.write(
      `[package] scratch cdk synth: ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
    );
    nag = JSON.parse(out.trim().split("\n").at(-1) ?? "{}") as typeof nag;
    platform = read(outdir, "Platform.template.json");
  }, 400_000);

  afterAll(() => {
    scratch?.cleanUp();
    if (repoOutdir !== undefined) rmSync(repoOutdir, { recursive: true, force: true });
  });

  it("ships the compiled construct and the prebuilt function code", () => {
    for (const file of [
      "dist/infra/index.js",
      "dist/infra/index.d.ts",
      "dist/lambda/allocator/index.mjs",
      "dist/lambda/backfill/index.js",
    ]) {
      expect(packed.files, file).toContain(file);
    }
    const modules = join(scratch.dir, "node_modules");
    expect(existsSync(join(modules, "esbuild"))).toBe(false);
    expect(existsSync(join(modules, "aws-cdk-lib"))).toBe(true);
  });

  it("synthesizes clean with cdk-nag (whose checks do run: a plain queue has findings)", () => {
    expect(nag.findings).toEqual([]);
    expect(nag.probeFindings.length).toBeGreaterThan(0);
    const report = JSON.parse(readFileSync(join(outdir, "validation-report.json"), "utf8")) as {
      pluginReports: unknown[];
    };
    expect(report.pluginReports).toEqual([]);
  });

  it("gives each allocator five tables, its own event sources, alarms, topic and dashboard", () => {
    for (const name of ["Blue", "Green"]) {
      const mine = (type: string) => ofType(platform, type).filter(([id]) => id.startsWith(name));
      const tables = mine("AWS::DynamoDB::GlobalTable");
      expect(tables, name).toHaveLength(5);
      for (const [, table] of tables) expect(table.Properties.TableName).toBeUndefined();

      const [[functionId] = []] = mine("AWS::Lambda::Function");
      const sources = mine("AWS::Lambda::EventSourceMapping");
      expect(sources).toHaveLength(2);
      const streams = sources.map(([, source]) => {
        expect(source.Properties.FunctionName).toEqual({ Ref: functionId });
        return (source.Properties.EventSourceArn as { "Fn::GetAtt": [string, string] })[
          "Fn::GetAtt"
        ];
      });
      for (const [table, attribute] of streams) {
        expect(
          table.startsWith(`${name}MeshesTable`) || table.startsWith(`${name}DataplanesTable`),
        ).toBe(true);
        expect(attribute).toBe("StreamArn");
      }

      const [[topicId] = []] = mine("AWS::SNS::Topic");
      const alarms = mine("AWS::CloudWatch::Alarm");
      expect(alarms).toHaveLength(16);
      for (const [, alarm] of alarms) {
        expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
        expect(alarm.Properties.AlarmName).toBeUndefined();
        if (alarm.Properties.Namespace === "VipAllocator") {
          expect(alarm.Properties.Dimensions).toEqual([
            { Name: "service", Value: `vips-${name.toLowerCase()}` },
          ]);
        }
      }
      const dashboards = mine("AWS::CloudWatch::Dashboard");
      expect(dashboards).toHaveLength(1);
      expect(dashboards[0]?.[1].Properties.DashboardName).toBeUndefined();
    }
    expect(ofType(platform, "AWS::CloudWatch::Alarm")).toHaveLength(32);
  });

  it("deploys the same function as this repository's NodejsFunction: same code, handler, runtime, settings", () => {
    const fn = (template: Template) => {
      const [[, resource] = []] = ofType(template, "AWS::Lambda::Function").filter(([id]) =>
        id.startsWith("BlueFunction"),
      );
      return resource?.Properties as Record<string, unknown> & {
        Code: { S3Key: string };
      };
    };
    const installed = fn(platform);
    const repo = fn(repoTemplate);
    const { Code: installedCode, ...installedRest } = installed;
    const { Code: repoCode, ...repoRest } = repo;
    expect(installedRest).toEqual(repoRest);
    expect(installedRest.Handler).toBe("index.handler");

    const asset = (dir: string, key: string) => join(dir, `asset.${key.replace(/\.zip$/, "")}`);
    const installedDir = asset(outdir, installedCode.S3Key);
    const repoDir = asset(repoOutdir, repoCode.S3Key);
    expect(readdirSync(installedDir).sort()).toEqual(["index.mjs", "index.mjs.map"]);
    expect(readdirSync(repoDir).sort()).toEqual(["index.mjs", "index.mjs.map"]);
    // The bundle: byte for byte.
    expect(
      readFileSync(join(installedDir, "index.mjs")).equals(
        readFileSync(join(repoDir, "index.mjs")),
      ),
    ).toBe(true);
    // The source map: the same mappings; its source paths are relative to where each was built.
    const map = (dir: string) =>
      JSON.parse(readFileSync(join(dir, "index.mjs.map"), "utf8")) as {
        mappings: string;
        names: string[];
        sources: string[];
      };
    // The part below the repository (node_modules/..., functions/..., infra/...), whatever the
    // depth of the directories each was built in relative to it.
    const fromRoot = (source: string) => {
      const modules = source.indexOf("node_modules/");
      if (modules >= 0) return source.slice(modules);
      return source.match(/(?:^|\/)((?:functions|infra)\/.*)$/)?.[1] ?? source;
    };
    const [a, b] = [map(installedDir), map(repoDir)];
    expect(a.mappings).toBe(b.mappings);
    expect(a.names).toEqual(b.names);
    expect(a.sources.map(fromRoot)).toEqual(b.sources.map(fromRoot));
  });

  it("type-checks a TypeScript CDK app against the shipped .d.ts, and ships the item's schema", async () => {
    scratch.write(
      "stack.ts",
      [
        'import { App, Duration, Stack } from "aws-cdk-lib";',
        'import { VipAllocator, type VipAllocatorProps } from "serverless-vip-allocator/cdk";',
        'const props: VipAllocatorProps = { serviceName: "vips", timeout: Duration.seconds(90) };',
        'const allocator = new VipAllocator(new Stack(new App(), "S"), "Vips", props);',
        "const name: string = allocator.vipsTable.tableName;",
        "// @ts-expect-error: memorySize is a number",
        'new VipAllocator(new Stack(new App(), "T"), "Vips", { memorySize: "512" });',
        "export { name };",
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
          typeRoots: [join(REPO_ROOT, "node_modules/@types")],
          types: ["node"],
          skipLibCheck: true,
        },
        files: ["stack.ts"],
      }),
    );
    const out = await scratch
      .node(join(REPO_ROOT, "node_modules/typescript/bin/tsc"), {})
      .catch((error: { stdout?: string }) => `tsc failed:\n${error.stdout ?? String(error)}`);
    expect(out).toBe("");
    const schema = scratch.write(
      "schema.cjs",
      'console.log(require.resolve("serverless-vip-allocator/schema/vip-item.schema.json"));',
    );
    expect((await scratch.node(schema)).trim()).toMatch(/schema\/vip-item\.schema\.json$/);
  }, 180_000);

  it("inlines the same backfill trigger handler as this repository's synth", () => {
    const existing = read(outdir, "Existing.template.json");
    const triggers = ofType(existing, "AWS::Lambda::Function").filter(([id]) =>
      id.startsWith("OnExistingTablesBackfill"),
    );
    expect(triggers).toHaveLength(1);
    const code = triggers[0]?.[1].Properties.Code as { ZipFile: string };
    expect(code.ZipFile).toBe(backfillHandlerCode());
    expect(ofType(existing, "AWS::DynamoDB::GlobalTable")).toHaveLength(3);
  });
});
