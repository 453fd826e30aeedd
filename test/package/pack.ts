/**
 * The package as a consumer gets it: `npm pack` (npm's `prepack` runs `npm run build`), then the
 * tarball installed into a scratch project in a temporary directory outside the repository,
 * from the local npm cache where it can (`--prefer-offline`). Shared by the consumer tests.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const run = promisify(execFile);

export const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface Packed {
  /** The tarball (`serverless-vip-allocator-<version>.tgz`) in a temporary directory. */
  readonly tarball: string;
  /** The files the tarball holds (paths inside the package). */
  readonly files: readonly string[];
  readonly bytes: number;
  readonly seconds: number;
  cleanUp(): void;
}

export async function packPackage(): Promise<Packed> {
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), "vips-pack-"));
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", dir], {
    cwd: REPO_ROOT,
    maxBuffer: 64 * 1024 * 1024,
    // `npm test --ignore-scripts` (the CI script) passes the setting on to child npm processes,
    // which would skip `prepack` and pack no build: a consumer's `npm pack` runs it.
    env: { ...process.env, npm_config_ignore_scripts: "false" },
  });
  // npm prints the build's output before the JSON on stdout: the JSON is the last array.
  const json = JSON.parse(stdout.slice(stdout.lastIndexOf("\n[") + 1)) as {
    filename: string;
    size: number;
    files: { path: string }[];
  }[];
  const [info] = json;
  if (info === undefined) throw new Error(`npm pack printed no result: ${stdout}`);
  return {
    tarball: join(dir, info.filename),
    files: info.files.map((file) => file.path),
    bytes: info.size,
    seconds: (Date.now() - started) / 1000,
    cleanUp: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface Scratch {
  readonly dir: string;
  readonly seconds: number;
  /** Runs `node` (no TypeScript loader) on a file of the scratch project. */
  node(file: string, env?: Record<string, string>): Promise<string>;
  write(file: string, text: string): string;
  cleanUp(): void;
}

/** A scratch project outside the repository with the tarball (and `extra` packages) installed. */
export async function scratchProject(
  tarball: string,
  extra: readonly string[] = [],
): Promise<Scratch> {
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), "vips-consumer-"));
  writeFileSync(
    join(dir, "package.json"),
    `${JSON.stringify({ name: "vips-consumer", version: "1.0.0", private: true }, null, 2)}\n`,
  );
  await run(
    "npm",
    [
      "install",
      "--prefer-offline",
      "--no-audit",
      "--no-fund",
      "--ignore-scripts",
      tarball,
      ...extra,
    ],
    { cwd: dir, maxBuffer: 64 * 1024 * 1024 },
  );
  return {
    dir,
    seconds: (Date.now() - started) / 1000,
    async node(file, env = {}) {
      const { stdout } = await run(process.execPath, [file], {
        cwd: dir,
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
        maxBuffer: 64 * 1024 * 1024,
      });
      return stdout;
    },
    write(file, text) {
      const path = join(dir, file);
      writeFileSync(path, text);
      return path;
    },
    cleanUp: () => rmSync(dir, { recursive: true, force: true }),
  };
}
