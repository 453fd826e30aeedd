import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, expect, test } from "vitest";
import { buildAllocatorBundle } from "../fixtures/allocator-bundle.ts";

const MAX_BUNDLE_BYTES = 5 * 1024 * 1024;
const outdir = mkdtempSync(join(tmpdir(), "vip-allocator-bundle-"));

afterAll(() => {
  rmSync(outdir, { recursive: true, force: true });
});

test("bundles the real handler with the construct's esbuild options", async () => {
  const result = await buildAllocatorBundle(outdir);
  const outfile = result.outfile;
  expect(result.errors).toEqual([]);

  const code = readFileSync(outfile, "utf8");
  const size = Buffer.byteLength(code);
  const mapSize = readFileSync(`${outfile}.map`).byteLength;
  console.log(`allocator bundle: ${size} bytes (source map ${mapSize} bytes)`);
  expect(size).toBeLessThan(MAX_BUNDLE_BYTES);

  // The AWS SDK is bundled (bundleAwsSDK), not taken from the runtime.
  const inputs = Object.keys(result.metafile.inputs);
  expect(inputs.some((path) => path.includes("node_modules/@aws-sdk/client-dynamodb/"))).toBe(true);

  // The function's own code is at most 50 of the repository's files (issue 31's bound; the
  // tools, the construct and the reader library stay out of it).
  const own = inputs.filter((path) => !path.includes("node_modules/"));
  expect(own.length).toBeGreaterThan(20);
  expect(own.length).toBeLessThanOrEqual(50);
  expect(own.filter((path) => !path.startsWith("functions/"))).toEqual([]);

  // No CommonJS `require` shim: an ESM bundle would throw "Dynamic require of ... is not
  // supported" at run time. If this fails, add a createRequire banner (infra/allocator-bundling.ts).
  expect(code).not.toContain("Dynamic require of");

  // The bundle loads as an ES module in a plain Node process and exports the handler.
  const probe = `const m = await import(${JSON.stringify(pathToFileURL(outfile).href)}); console.log(typeof m.handler);`;
  const loaded = execFileSync(process.execPath, ["--input-type=module", "-e", probe], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  expect(loaded.trim()).toBe("function");
});
