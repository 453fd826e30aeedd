/**
 * Builds the allocator's Lambda bundle the way the construct's NodejsFunction does: the same
 * esbuild options NodejsFunction derives from ALLOCATOR_BUNDLING (aws-lambda-nodejs bundling:
 * --platform=node --target --format --minify --sourcemap --sources-content --main-fields
 * --external), through esbuild's JS API; and the backfill trigger's handler as CommonJS. Used
 * by `npm run build` (the package's prebuilt function code, dist/lambda/) and by the tests. Not
 * part of the package's compiled construct: an installed construct never runs esbuild.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { OutputFormat } from "aws-cdk-lib/aws-lambda-nodejs";
import { build, type Metafile, transformSync } from "esbuild";
import {
  ALLOCATOR_BUNDLING,
  ALLOCATOR_ENTRY,
  BACKFILL_HANDLER_FILE,
  BACKFILL_TRANSFORM,
  PROJECT_ROOT,
} from "./allocator-bundling.ts";

export interface AllocatorBundle {
  /** The bundle's file (index.mjs for ESM), as the function's code asset holds it. */
  readonly outfile: string;
  readonly errors: readonly unknown[];
  readonly metafile: Metafile;
}

export async function buildAllocatorBundle(outdir: string): Promise<AllocatorBundle> {
  const options = ALLOCATOR_BUNDLING;
  const outfile = join(outdir, options.format === OutputFormat.ESM ? "index.mjs" : "index.js");
  const result = await build({
    absWorkingDir: PROJECT_ROOT,
    entryPoints: [ALLOCATOR_ENTRY],
    bundle: true,
    platform: "node",
    format: options.format === OutputFormat.ESM ? "esm" : "cjs",
    target: options.target,
    minify: options.minify,
    sourcemap: options.sourceMap,
    sourcesContent: options.sourcesContent,
    mainFields: options.mainFields,
    external: options.externalModules,
    outfile,
    metafile: true,
    logLevel: "silent",
  });
  return { outfile, errors: result.errors, metafile: result.metafile };
}

/** The backfill trigger's handler (infra/backfill-trigger-handler.ts) as CommonJS. */
export function compileBackfillHandler(): string {
  return transformSync(readFileSync(BACKFILL_HANDLER_FILE, "utf8"), BACKFILL_TRANSFORM).code;
}
