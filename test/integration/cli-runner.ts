import { type ChildProcess, spawn } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { prefixedTableEnv } from "../../functions/store/table-definitions.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = "tools/cli/bin.ts";

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the CLI as a separate process, as a user would: the environment of a user's shell (no
 * endpoint, no table overrides), local state in a directory of the test's own.
 */
export class CliRunner {
  private counter = 0;

  constructor(
    private readonly prefix: string,
    private readonly localDir: () => string,
  ) {}

  private baseEnv(): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) {
      if (value === undefined) continue;
      if (/^(DYNAMODB_ENDPOINT|INIT_CWD|VIP_|(MESHES|DATAPLANES|VIPS|CLAIMS)_TABLE$)/.test(key)) {
        continue;
      }
      env[key] = value;
    }
    return { ...env, VIPS_LOCAL_DIR: this.localDir() };
  }

  readonly spawnCli = (args: readonly string[], env: Record<string, string>): ChildProcess =>
    spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
      cwd: ROOT,
      env: { ...this.baseEnv(), ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });

  /** Runs one command to its end and collects its output. */
  readonly vips = (
    args: readonly string[],
    options: { env?: Record<string, string>; input?: string } = {},
  ): Promise<Run> =>
    new Promise((resolveRun, reject) => {
      const child = this.spawnCli(args, options.env ?? {});
      let stdout = "";
      let stderr = "";
      child.stdout?.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr?.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.on("error", reject);
      child.on("close", (code) => resolveRun({ code, stdout, stderr }));
      child.stdin?.end(options.input ?? "");
    });

  /** Table names of their own, so tests sharing the emulator never see each other's streams. */
  readonly freshTableEnv = (): Record<string, string> => {
    this.counter++;
    const prefix = `${this.prefix}${this.counter}`;
    // The CLI's local runtime has the optional external-services table: prefixed here too.
    return {
      ...prefixedTableEnv(prefix, { externalServices: true }),
    };
  };
}
