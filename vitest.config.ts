import { spawnSync } from "node:child_process";
import { defineConfig } from "vitest/config";
import { javaCommand } from "./tools/local/dynamodb-local.ts";

/**
 * Three projects: the tests that need no DynamoDB run once ("unit"); the ones that start a local
 * engine (the integration tests with the store contract suite, the chaos seeds on an engine,
 * the cost meter) run twice, on DynamoDB Local and on moto_server, chosen by VIPS_EMULATOR
 * (tools/local/emulator.ts). Without Java the DynamoDB Local project is left out, with a
 * line saying so (scripts/setup.mjs says it too).
 */
const ON_AN_ENGINE = [
  "test/integration/**/*.test.ts",
  "test/chaos/chaos-moto.test.ts",
  "test/bench/cost-meter.test.ts",
  "test/package/**/*.test.ts",
];

/**
 * The two slowest engine-backed files on moto_server (about 230 s and 175 s of a worker on this
 * 2-vCPU machine, against 220 s and 50 s on DynamoDB Local): `npm test` runs them on DynamoDB
 * Local only, to stay well under 10 minutes; `.ci/run` sets VIPS_TEST_ALL_ON_MOTO=1 and runs
 * them on moto too. Without Java they run on moto always.
 */
const SLOW_ON_MOTO = [
  "test/integration/cli.test.ts",
  "test/integration/sweep.test.ts",
  // The operator's CLI (issue 30): about 320 s of a worker on DynamoDB Local, a process a step.
  "test/integration/cli-operator.test.ts",
];

/**
 * `npm test` stays well under 10 minutes on a 2-vCPU machine by leaving these to CI, which sets
 * VIPS_TEST_FULL=1 (`.ci/run`; about 600 s of a worker together, measured with `npm test` at
 * 14 minutes before): the packed package's consumer tests (`test/package`: the tarball in a CDK
 * app, a consumer, `npx vips`), the alarms soak, the operator CLI's process-per-step test (the
 * CLI's commands run in `test/integration/cli.test.ts` too), and the moto copies of the four
 * slowest files that both engines run.
 */
const FULL_ONLY = [
  "test/package/**/*.test.ts",
  "test/integration/alarms-soak.test.ts",
  "test/integration/cli-operator.test.ts",
];
const FULL_ONLY_ON_MOTO = [
  "test/integration/membership-index.test.ts",
  "test/integration/cli-external-services.test.ts",
  "test/integration/adopt.test.ts",
  "test/integration/allocator.test.ts",
];
const full = process.env.VIPS_TEST_FULL === "1";

/**
 * The packed package's consumer tests (test/package) and the alarms soak: they check the tarball
 * or the alarms, not the engine, so one engine is enough (DynamoDB Local when Java runs, else
 * moto).
 */
const ONE_ENGINE_ONLY = ["test/package/**/*.test.ts", "test/integration/alarms-soak.test.ts"];

/**
 * Tests at a size only DynamoDB Local serves in reasonable time (a mesh of thousands of services
 * under an emulated function timeout: on moto, which serves one request at a time, the timing it
 * checks would measure moto): DynamoDB Local when Java runs, else moto.
 */
const LARGE_ON_DYNAMODB_LOCAL = ["test/integration/continuation.test.ts"];

const javaRuns = spawnSync(javaCommand(), ["-version"], { stdio: "ignore" }).status === 0;
const engines = javaRuns ? ["dynamodb-local", "moto"] : ["moto"];
// Vitest loads this file more than once in one process: the note is printed once.
if (!javaRuns && process.env.VIPS_JAVA_NOTED === undefined) {
  process.env.VIPS_JAVA_NOTED = "1";
  process.stderr.write(
    "[vitest] java not found: the tests run on moto_server only, not on DynamoDB Local (install a Java runtime 11+, e.g. apt-get install openjdk-17-jre-headless)\n",
  );
}

export default defineConfig({
  // `serverless-vip-allocator/reader` resolves to the TypeScript source here (the export map's
  // "vips-source" condition, also in tsconfig.json); installed packages get dist/ (decision 080).
  resolve: { conditions: ["vips-source"] },
  ssr: { resolve: { conditions: ["vips-source"] } },
  test: {
    testTimeout: 60_000,
    // Starting an engine (a JVM, a Python process) on a loaded machine can take a while; the
    // start-up itself gives up after 90 s (tools/local/emulator-process.ts).
    hookTimeout: 120_000,
    pool: "forks",
    maxWorkers: 2,
    // On a Node older than 22 the set-up has said so once (scripts/setup.mjs); the SDK would
    // repeat it in every worker.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/**/*.test.ts"], exclude: ON_AN_ENGINE },
      },
      ...engines.map((engine) => ({
        extends: true as const,
        test: {
          name: engine,
          include: ON_AN_ENGINE,
          exclude: [
            ...(full ? [] : FULL_ONLY),
            ...(engine === "moto" && javaRuns
              ? [
                  ...ONE_ENGINE_ONLY,
                  ...LARGE_ON_DYNAMODB_LOCAL,
                  ...(process.env.VIPS_TEST_ALL_ON_MOTO !== "1" ? SLOW_ON_MOTO : []),
                  ...(full ? [] : FULL_ONLY_ON_MOTO),
                ]
              : []),
          ],
          env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", VIPS_EMULATOR: engine },
          // DynamoDB Local: one JVM shared by the project's files (test/fixtures/engine.ts).
          globalSetup: engine === "dynamodb-local" ? ["test/fixtures/shared-engine.ts"] : [],
        },
      })),
    ],
  },
});
