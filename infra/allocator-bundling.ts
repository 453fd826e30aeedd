import { fileURLToPath } from "node:url";
import { Architecture, Runtime } from "aws-cdk-lib/aws-lambda";
import { type BundlingOptions, OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";

/**
 * How the allocator function is built, in one place: the construct passes these to
 * `NodejsFunction`, and the bundle-size test passes the same values to the esbuild JS API, so
 * the test measures what `cdk synth` ships.
 */

/** The repository root (where `package-lock.json` lives), independent of the caller's cwd. */
export const PROJECT_ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The Lambda entry point; it exports `handler`. */
export const ALLOCATOR_ENTRY = fileURLToPath(
  new URL("../functions/allocator/handler.ts", import.meta.url),
);

/** The backfill trigger's handler, inlined as CommonJS (infra/vip-allocator-backfill.ts). */
export const BACKFILL_HANDLER_FILE = fileURLToPath(
  new URL("./backfill-trigger-handler.ts", import.meta.url),
);

export const ALLOCATOR_LOCK_FILE = fileURLToPath(new URL("../package-lock.json", import.meta.url));

/** An explicit, current runtime (cdk-nag AwsSolutions-L1 wants the newest Node.js family). */
export const ALLOCATOR_RUNTIME = Runtime.NODEJS_24_X;

/** Graviton: about 20% cheaper per GB-second than x86 and as fast for this workload. */
export const ALLOCATOR_ARCHITECTURE = Architecture.ARM_64;

/** esbuild's `target` for {@link ALLOCATOR_RUNTIME} ("nodejs24.x" -> "node24"), as CDK derives it. */
export const ALLOCATOR_TARGET = ALLOCATOR_RUNTIME.name.replace(/^nodejs(\d+)\.x$/, "node$1");

/**
 * - ESM output, and `mainFields: module, main` so packages without an `exports` map resolve
 *   to their ES builds too. Then every dependency of the handler is ESM and the bundle needs no
 *   `createRequire` banner: esbuild emits no `require` shim (no "Dynamic require of ... is not
 *   supported" at run time). The bundle test checks that this stays true; if a CommonJS
 *   dependency that requires Node built-ins is ever added, it fails and says to add the banner
 *   `import { createRequire } from "node:module"; const require = createRequire(import.meta.url);`.
 * - `bundleAwsSDK`: ship the SDK version pinned in package-lock.json (the one the tests ran
 *   against), not whatever the runtime happens to carry.
 * - minified, with a separate source map without sources content (small, and
 *   `NODE_OPTIONS=--enable-source-maps` turns stack traces back into TypeScript lines).
 */
export const ALLOCATOR_BUNDLING = {
  format: OutputFormat.ESM,
  target: ALLOCATOR_TARGET,
  minify: true,
  sourceMap: true,
  sourcesContent: false,
  mainFields: ["module", "main"],
  bundleAwsSDK: true,
  externalModules: [] as string[],
} satisfies BundlingOptions;

/** esbuild's transform of the backfill trigger's handler: TypeScript to CommonJS. */
export const BACKFILL_TRANSFORM = {
  loader: "ts",
  format: "cjs",
  target: ALLOCATOR_TARGET,
} as const;

/**
 * Where the construct's function code comes from. Compiled into an installed package
 * (`dist/infra/*.js`, or the CommonJS bundle `dist/infra/cdk.cjs`), it uses the code `npm run build` prebuilt into `dist/lambda/`
 * (`Code.fromAsset`, no esbuild at synth); from this repository's TypeScript source, it bundles
 * with NodejsFunction (decision 082).
 */
export const FROM_PACKAGE = !import.meta.url.endsWith(".ts");

/** The prebuilt allocator bundle (index.mjs and its source map), relative to dist/infra/. */
export const PREBUILT_ALLOCATOR_DIR = fileURLToPath(
  new URL("../lambda/allocator", import.meta.url),
);

/** The prebuilt backfill trigger handler (CommonJS), relative to dist/infra/. */
export const PREBUILT_BACKFILL_FILE = fileURLToPath(
  new URL("../lambda/backfill/index.js", import.meta.url),
);
