/**
 * The construct in the CDK apps platform teams have (issue 29), from the packed tarball, in
 * scratch projects under the OS temporary directory, outside the repository:
 * - the app `cdk init app --language typescript` makes today (aws-cdk-cli's template of
 *   2026-07: no "type" in package.json, so CommonJS; tsconfig NodeNext with noEmit; TypeScript
 *   7; cdk.json's app `npx tsc && npx tsx bin/<app>.ts`), and the same sources compiled by tsc and
 *   run by plain `node bin/<app>.js`;
 * - the template before it (TypeScript 5.9, `npx ts-node --prefer-ts-exts bin/<app>.ts`);
 * - an ES module app (`"type": "module"`, compiled by tsc, run by node);
 * each on Node 22 and on Node 24. Every app holds two allocators with default props and runs
 * cdk-nag's AwsSolutions pack at synth; the synthesized template is read from cdk.out.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NODE_VERSIONS, nodeBinDir } from "./node-binaries.ts";
import { type Packed, packPackage } from "./pack.ts";

const run = promisify(execFile);

/** Pinned like this repository's devDependencies (from the local npm cache where it can). */
const CDK = ["aws-cdk-lib@2.276.0", "constructs@10.8.1", "cdk-nag@3.0.2", "@types/node@24.19.4"];
/** The current template's tools (its package.json: typescript ~7.0.2, tsx ^4.23.0). */
const CURRENT_TOOLS = ["typescript@7.0.2", "tsx@4.23.15"];
/** The template of 2025-12 to 2026-07 (typescript ~5.9.3, ts-node ^10.9.2). */
const OLDER_TOOLS = ["typescript@5.9.3", "ts-node@10.9.2"];

/** tsconfig.json as the templates write it (`types: ["jest", "node"]` without jest: no tests here). */
const TSCONFIG = {
  compilerOptions: {
    target: "ES2022",
    module: "NodeNext",
    moduleResolution: "NodeNext",
    lib: ["es2022"],
    declaration: true,
    strict: true,
    noImplicitAny: true,
    strictNullChecks: true,
    noImplicitThis: true,
    alwaysStrict: true,
    noUnusedLocals: false,
    noUnusedParameters: false,
    noImplicitReturns: true,
    noFallthroughCasesInSwitch: false,
    inlineSourceMap: true,
    inlineSources: true,
    experimentalDecorators: true,
    strictPropertyInitialization: false,
    skipLibCheck: true,
    typeRoots: ["./node_modules/@types"],
    noEmit: true,
    isolatedModules: true,
    types: ["node"],
  },
  exclude: ["node_modules", "cdk.out"],
};

/** bin/vips-app.ts: the template's, with cdk-nag registered and its findings printed. */
const BIN = `#!/usr/bin/env node
import * as cdk from 'aws-cdk-lib/core';
import { AwsSolutionsChecks } from 'cdk-nag';
import { VipsAppStack } from '../lib/vips-app-stack${"{EXT}"}';

const app = new cdk.App();
new VipsAppStack(app, 'VipsAppStack', {
  /* If you don't specify 'env', this stack will be environment-agnostic. */
});
cdk.Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
const findings = new AwsSolutionsChecks().validateScope(app).violations.map((v) => v.ruleName);
console.log(JSON.stringify({ findings, moduleKind: typeof require === 'function' ? 'cjs' : 'esm' }));
`;

/** lib/vips-app-stack.ts: the template's stack with two allocators, default props. */
const LIB = `import * as cdk from 'aws-cdk-lib/core';
import { Construct } from 'constructs';
import { VipAllocator } from 'serverless-vip-allocator/cdk';

export class VipsAppStack extends cdk.Stack {
  constructor(scope: Construct, id: string, props?: cdk.StackProps) {
    super(scope, id, props);
    const blue = new VipAllocator(this, 'Blue');
    const green = new VipAllocator(this, 'Green');
    new cdk.CfnOutput(this, 'BlueService', { value: blue.serviceName });
    new cdk.CfnOutput(this, 'GreenService', { value: green.serviceName });
  }
}
`;

interface App {
  readonly dir: string;
  /** What npm printed on stderr while installing (install-script warnings among it). */
  readonly installWarnings: string;
}

interface Synth {
  readonly findings: string[];
  readonly moduleKind: string;
  readonly template: {
    Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
    Outputs: Record<string, { Value: unknown }>;
  };
}

const scratchDirs: string[] = [];
let packed: Packed;

async function installApp(name: string, packages: readonly string[]): Promise<App> {
  const dir = mkdtempSync(join(tmpdir(), `vips-${name}-`));
  scratchDirs.push(dir);
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify({ name, version: "0.1.0", scripts: { build: "tsc", cdk: "cdk" } }, null, 2)}\n`,
  );
  // Install scripts on (the default): what npm says about them is part of the check. npm runs
  // on Node 24 (CI's), as the package's engines field asks.
  const { stderr } = await run(
    "npm",
    ["install", "--prefer-offline", "--no-audit", "--no-fund", packed.tarball, ...packages],
    {
      cwd: dir,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, PATH: `${nodes.get("24.22.3")}:${process.env.PATH ?? ""}` },
    },
  );
  return { dir, installWarnings: stderr };
}

function writeSources(dir: string, importExtension: string): void {
  mkdirSync(join(dir, "bin"), { recursive: true });
  mkdirSync(join(dir, "lib"), { recursive: true });
  writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(TSCONFIG, null, 2)}\n`);
  writeFileSync(join(dir, "bin", "vips-app.ts"), BIN.replace("{EXT}", importExtension));
  writeFileSync(join(dir, "lib", "vips-app-stack.ts"), LIB);
}

/** Runs `command` in `dir` with the given Node first on PATH; then reads what it synthesized. */
async function synth(dir: string, command: string, nodeBin: string): Promise<Synth> {
  const outdir = join(dir, `cdk.out-${Math.random().toString(36).slice(2)}`);
  const env = {
    PATH: `${nodeBin}:${dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
    HOME: process.env.HOME ?? "",
    CDK_OUTDIR: outdir,
    npm_config_update_notifier: "false",
  };
  let stdout: string;
  try {
    ({ stdout } = await run("sh", ["-c", command], { cwd: dir, env, maxBuffer: 64 * 1024 * 1024 }));
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} failed:\n${failed.stdout ?? ""}\n${failed.stderr ?? ""}`);
  }
  const printed = JSON.parse(stdout.trim().split("\n").at(-1) ?? "{}") as Omit<Synth, "template">;
  const template = JSON.parse(
    readFileSync(join(outdir, "VipsAppStack.template.json"), "utf8"),
  ) as Synth["template"];
  rmSync(outdir, { recursive: true, force: true });
  return { ...printed, template };
}

/** What every app must synthesize: two allocators, cdk-nag clean, their own metrics. */
function expectTwoAllocators(result: Synth): void {
  expect(result.findings).toEqual([]);
  const resources = Object.entries(result.template.Resources);
  const ofType = (type: string) => resources.filter(([, r]) => r.Type === type);
  expect(ofType("AWS::DynamoDB::GlobalTable")).toHaveLength(10);
  expect(
    ofType("AWS::Lambda::Function").filter(([id]) => /^(Blue|Green)Function/.test(id)),
  ).toHaveLength(2);
  const blue = result.template.Outputs.BlueService?.Value;
  const green = result.template.Outputs.GreenService?.Value;
  expect(blue).toMatch(/^VipsAppStack-Blue-[0-9A-F]{8}$/);
  expect(green).toMatch(/^VipsAppStack-Green-[0-9A-F]{8}$/);
  // Distinct metric dimensions: each allocator's own alarms read its own service.
  for (const [name, service] of [
    ["Blue", blue],
    ["Green", green],
  ] as const) {
    const own = ofType("AWS::CloudWatch::Alarm").filter(
      ([id, alarm]) => id.startsWith(name) && alarm.Properties.Namespace === "VipAllocator",
    );
    expect(own.length, name).toBeGreaterThan(0);
    for (const [, alarm] of own) {
      expect(alarm.Properties.Dimensions).toEqual([{ Name: "service", Value: service }]);
    }
    const [[, fn] = []] = ofType("AWS::Lambda::Function").filter(([id]) =>
      id.startsWith(`${name}Function`),
    );
    if (fn === undefined) throw new Error(`no ${name} function`);
    const variables = (fn.Properties.Environment as { Variables: Record<string, unknown> })
      .Variables;
    expect(variables.POWERTOOLS_SERVICE_NAME).toBe(service);
    // The prebuilt function code, not a bundling step (no esbuild at the consumer's synth).
    expect(fn.Properties.Handler).toBe("index.handler");
  }
}

/** The packages an install-script warning lists (npm 11: "  name@version (script: ...)"). */
function scriptWarnings(stderr: string): string[] {
  return [...stderr.matchAll(/^npm warn install-scripts\s+(\S+)@\S+ \(/gm)].map((m) => m[1] ?? "");
}

/**
 * The Node versions each app is synthesized on: Lambda's and CI's 24 in every run; 22 as well
 * when `VIPS_TEST_ALL_NODES=1` (`.ci/run` sets it), which also adds the older ts-node app. Each synthesis takes 15 s to 3 min on two
 * vCPUs, so the full matrix would take `npm test` past ten minutes by itself.
 */
const APP_NODES: readonly string[] =
  process.env.VIPS_TEST_ALL_NODES === "1" ? NODE_VERSIONS : ["24.22.3"];

const nodes = new Map<string, string>();

beforeAll(async () => {
  const [pack] = await Promise.all([
    packPackage(),
    ...APP_NODES.map(async (version) => nodes.set(version, await nodeBinDir(version))),
  ]);
  packed = pack;
}, 600_000);

afterAll(() => {
  packed?.cleanUp();
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

describe("the app cdk init makes today (CommonJS, TypeScript 7, tsc then tsx)", () => {
  let app: App;

  beforeAll(async () => {
    app = await installApp("vips-app", [...CDK, ...CURRENT_TOOLS]);
    writeSources(app.dir, "");
    writeFileSync(
      join(app.dir, "cdk.json"),
      `${JSON.stringify({ app: "npx tsc && npx tsx bin/vips-app.ts" }, null, 2)}\n`,
    );
  }, 600_000);

  it("installs with no install-script warning about the package or its dependencies", () => {
    // tsx brings esbuild (an install script of the app's own tools); nothing else may be listed.
    expect(scriptWarnings(app.installWarnings).filter((name) => name !== "esbuild")).toEqual([]);
    expect(app.installWarnings).not.toContain("serverless-vip-allocator");
  });

  for (const version of APP_NODES) {
    it(`synthesizes with cdk.json's command on Node ${version}`, async () => {
      const command = JSON.parse(readFileSync(join(app.dir, "cdk.json"), "utf8")).app as string;
      const result = await synth(app.dir, command, nodes.get(version) ?? "");
      expect(result.moduleKind).toBe("cjs");
      expectTwoAllocators(result);
    }, 300_000);
  }

  it("synthesizes from tsc's CommonJS output run by plain node (Node 24)", async () => {
    const result = await synth(
      app.dir,
      "npx tsc --noEmit false && node bin/vips-app.js",
      nodes.get("24.22.3") ?? "",
    );
    expect(result.moduleKind).toBe("cjs");
    expectTwoAllocators(result);
  }, 300_000);
});

describe("an ES module app, and an older ts-node app (in the full run)", () => {
  let app: App;
  let esm: string;

  beforeAll(async () => {
    app = await installApp("vips-older-app", [...CDK, ...OLDER_TOOLS]);
    writeSources(app.dir, "");
    // The ES module app: a directory of its own with "type": "module", same node_modules.
    esm = join(app.dir, "esm-app");
    mkdirSync(esm);
    writeFileSync(
      join(esm, "package.json"),
      `${JSON.stringify({ name: "vips-esm-app", version: "0.1.0", type: "module" }, null, 2)}\n`,
    );
    writeSources(esm, ".js");
    const tsconfig = JSON.parse(readFileSync(join(esm, "tsconfig.json"), "utf8"));
    tsconfig.compilerOptions.typeRoots = ["../node_modules/@types"];
    writeFileSync(join(esm, "tsconfig.json"), JSON.stringify(tsconfig, null, 2));
  }, 600_000);

  it("installs with no install-script warning", () => {
    expect(scriptWarnings(app.installWarnings)).toEqual([]);
    expect(app.installWarnings).not.toContain("install-scripts");
  });

  // The ts-node app type-checks aws-cdk-lib in-process (about two minutes on two vCPUs): only in
  // the full run (VIPS_TEST_ALL_NODES=1, CI), on every Node version there.
  for (const version of process.env.VIPS_TEST_ALL_NODES === "1" ? APP_NODES : []) {
    it(`synthesizes a CommonJS app with npx ts-node --prefer-ts-exts on Node ${version}`, async () => {
      const result = await synth(
        app.dir,
        "npx ts-node --prefer-ts-exts bin/vips-app.ts",
        nodes.get(version) ?? "",
      );
      expect(result.moduleKind).toBe("cjs");
      expectTwoAllocators(result);
    }, 300_000);
  }

  for (const version of APP_NODES) {
    it(`synthesizes an ES module app compiled by tsc on Node ${version}`, async () => {
      const result = await synth(
        esm,
        "npx tsc --noEmit false && node bin/vips-app.js",
        nodes.get(version) ?? "",
      );
      expect(result.moduleKind).toBe("esm");
      expectTwoAllocators(result);
    }, 300_000);
  }
});
