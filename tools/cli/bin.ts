/**
 * The `vips` executable: the package's `bin` (bundled to dist/cli/vips.mjs by scripts/build.ts,
 * run by `npx vips`). It always runs the CLI; main.ts runs it only when started as a script.
 */
import { runAsProcess } from "./main.ts";

runAsProcess(process.argv.slice(2));
