/**
 * `npm run build` (also npm's `prepack`): what the package ships, under dist/.
 * - the reader (`serverless-vip-allocator/reader`): ES modules and `.d.ts` from tsc
 *   (tsconfig.build.json), and one CommonJS file bundled by esbuild (dependencies left external);
 * - the construct library (`serverless-vip-allocator/cdk`): ES modules and `.d.ts` from the same
 *   tsc run, and one CommonJS file for CommonJS apps (`cdk init app --language typescript`),
 *   dist/infra/cdk.cjs, bundled by esbuild (aws-cdk-lib, constructs and the other dependencies
 *   left external; beside index.js, so the prebuilt function code is found the same way);
 * - the function code the installed construct deploys (decision 082): the allocator's bundle
 *   (dist/lambda/allocator, the esbuild options NodejsFunction uses in this repository) and the
 *   backfill trigger's handler (dist/lambda/backfill/index.js, CommonJS);
 * - the operator's CLI, the `bin` `vips` (dist/cli/vips.mjs, scripts/build-cli.ts, decision 140).
 * Everything is rebuilt from scratch (dist/ is removed first). Decision 080.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { buildAllocatorBundle, compileBackfillHandler } from "../infra/allocator-esbuild.ts";
import { buildCli } from "./build-cli.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const dist = join(root, "dist");
const started = Date.now();

rmSync(dist, { recursive: true, force: true });
execFileSync(
  process.execPath,
  [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"],
  {
    cwd: root,
    stdio: "inherit",
  },
);
rewriteDeclarationImports(dist);
await build({
  absWorkingDir: root,
  entryPoints: ["functions/reader/index.ts"],
  bundle: true,
  packages: "external",
  platform: "node",
  format: "cjs",
  target: "node20",
  outfile: join(dist, "reader.cjs"),
  logLevel: "warning",
});
await build({
  absWorkingDir: root,
  entryPoints: ["infra/index.ts"],
  bundle: true,
  packages: "external",
  platform: "node",
  format: "cjs",
  target: "node22",
  outfile: join(dist, "infra", "cdk.cjs"),
  // The construct finds its prebuilt code relative to its own module (import.meta.url).
  define: { "import.meta.url": "__vipsModuleUrl" },
  banner: { js: 'var __vipsModuleUrl = require("node:url").pathToFileURL(__filename).href;' },
  logLevel: "warning",
});
const bundle = await buildAllocatorBundle(join(dist, "lambda", "allocator"));
if (bundle.errors.length > 0) throw new Error(`allocator bundle: ${JSON.stringify(bundle.errors)}`);
mkdirSync(join(dist, "lambda", "backfill"), { recursive: true });
writeFileSync(join(dist, "lambda", "backfill", "index.js"), compileBackfillHandler());

// --- The operator's CLI: the package's `bin` (vips), dist/cli/vips.mjs (decision 140) -------
const cli = await buildCli(root);
process.stderr.write(`[build] CLI bundle: ${cli.bytes} bytes\n`);
// --- end of the CLI's block -------------------------------------------------------------------
process.stderr.write(`[build] dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);

/**
 * tsc rewrites `./x.ts` to `./x.js` in the JavaScript it emits but not in the `.d.ts` files; a
 * consumer's TypeScript (without allowImportingTsExtensions) wants `.js` there too.
 */
function rewriteDeclarationImports(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".d.ts")) continue;
    const file = join(entry.parentPath, entry.name);
    const text = readFileSync(file, "utf8");
    const rewritten = text.replace(/(["'])(\.{1,2}\/[^"']+)\.ts\1/g, "$1$2.js$1");
    if (rewritten !== text) writeFileSync(file, rewritten);
  }
}
