/**
 * The operator's CLI as the package ships it (the `bin` `vips`, decision 140): one ES module,
 * dist/cli/vips.mjs, bundled by esbuild from tools/cli/bin.ts with a `#!/usr/bin/env node`
 * line, so `npx vips` runs compiled JavaScript (no TypeScript at run time). The package's own
 * `dependencies` (the reader's: the DynamoDB client, ipaddr.js, dns-packet) stay external and
 * are installed with it; everything else the CLI needs (yaml, the Streams and SQS clients,
 * Powertools) is bundled, so installing the package adds no dependency for the reader's users.
 * The local engine (DynamoDB Local from amplify-dynamodb-simulator, or moto) is not bundled:
 * `vips demo` says how to get it. Its two launcher files are copied beside the bundle, where
 * the bundled code looks for them (next to its own file).
 */
import { chmodSync, copyFileSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

/** The bundle's file, relative to the package root (package.json `bin`). */
export const CLI_BUNDLE = "dist/cli/vips.mjs";

/** Files the local engines start from, next to the bundle (tools/local/*.ts find them there). */
const LAUNCHERS = ["tools/local/LoopbackDynamoDbLocal.java", "tools/local/moto_serial_server.py"];

export async function buildCli(root: string): Promise<{ bytes: number }> {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  const outfile = join(root, CLI_BUNDLE);
  const result = await build({
    absWorkingDir: root,
    entryPoints: ["tools/cli/bin.ts"],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    external: [...Object.keys(pkg.dependencies), "amplify-dynamodb-simulator"],
    // Bundled CommonJS code (the AWS SDK's) calls require(): an ES module has none of its own.
    banner: {
      js: [
        "#!/usr/bin/env node",
        'import { createRequire as __vipsCreateRequire } from "node:module";',
        "const require = __vipsCreateRequire(import.meta.url);",
      ].join("\n"),
    },
    legalComments: "none",
    logLevel: "warning",
  });
  if (result.errors.length > 0) throw new Error(`CLI bundle: ${JSON.stringify(result.errors)}`);
  chmodSync(outfile, 0o755);
  mkdirSync(join(root, "dist", "cli"), { recursive: true });
  for (const file of LAUNCHERS) {
    copyFileSync(join(root, file), join(root, "dist", "cli", file.split("/").at(-1) as string));
  }
  return { bytes: statSync(outfile).size };
}
