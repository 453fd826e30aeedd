/**
 * The command-line interface: `vips COMMAND ...` (the package's `bin`, bundled by
 * scripts/build.ts; in a clone `npm run --silent vips -- COMMAND ...`). Exit codes: 0 ok,
 * 1 the command failed, 2 bad usage (or bad setting) or an unreachable or non-DynamoDB
 * endpoint. Every error is one line on stderr naming what is wrong (a refused file: one line
 * per problem).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type AllocatorConfig, loadConfig } from "../../functions/allocator/config.ts";
import { isAllocatorError } from "../../functions/domain/errors.ts";
import { StreamPollerError } from "../local/poller.ts";
import {
  arity,
  type CommandSpec,
  commandHelp,
  FLAG_USAGE,
  type Flags,
  GLOBAL_OPTIONS,
  namesOf,
  usageOf,
} from "./command-spec.ts";
import { COMMANDS } from "./command-table.ts";
import { demoCommand } from "./commands/demo.ts";
import {
  CliContext,
  consoleOutput,
  ensureReachable,
  nonDynamoAnswer,
  type Output,
  PROJECT_ROOT,
  parseEndpoint,
  parseFunctionTimeout,
  prepareEnvironment,
} from "./context.ts";
import { CliError, type ExitCode, UsageError } from "./errors.ts";
import { parseOutput } from "./output.ts";

type Env = Record<string, string | undefined>;

/** `vips --version`: the package's name and version (its package.json, clone or installed). */
export function versionLine(): string {
  const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, "package.json"), "utf8")) as {
    name: string;
    version: string;
  };
  return `${pkg.name} ${pkg.version}`;
}

export const HELP = [
  "usage: vips COMMAND [ARGS] [OPTIONS]   (in a clone: npm run --silent vips -- COMMAND ...)",
  "",
  "commands:",
  ...COMMANDS.map((spec) => `  ${usageOf(spec).slice(5)}\n      ${spec.summary}`),
  "",
  "global options:",
  ...GLOBAL_OPTIONS.map((line) => `  ${line}`),
  "",
  "settings (environment): MESHES_TABLE, DATAPLANES_TABLE, EXTERNAL_SERVICES_TABLE, VIPS_TABLE,",
  "  CLAIMS_TABLE, VIP_INDEX_TABLE, VIP_CIDR,",
  "  VIP_QUARANTINE_SECONDS, AWS_REGION, AWS_PROFILE; local state (checkpoints, failures) in",
  "  $VIPS_LOCAL_DIR (default: .local/ in a clone, ~/.local/state/serverless-vip-allocator)",
  "exit codes: 0 ok, 1 failed, 2 bad usage, bad setting, unreachable or non-DynamoDB endpoint",
  "one command's options and examples: vips COMMAND --help",
].join("\n");

const matches = (spec: CommandSpec, positionals: readonly string[]) =>
  namesOf(spec).find((words) => words.every((word, index) => positionals[index] === word));

/** The help a command line asks for: one command's, a group's (`vips get --help`), or all. */
function helpFor(positionals: readonly string[]): string {
  const words = positionals[0] === "help" ? positionals.slice(1) : positionals;
  const spec = COMMANDS.find((candidate) => matches(candidate, words) !== undefined);
  if (spec !== undefined) return commandHelp(spec);
  const group = COMMANDS.filter((candidate) =>
    namesOf(candidate).some((name) => name[0] === words[0]),
  );
  if (words.length > 0 && group.length > 0) {
    return [
      `vips ${words[0]} commands:`,
      ...group.map((g) => `  ${usageOf(g)}\n      ${g.summary}`),
      "",
      "one command's options and examples: vips COMMAND --help",
    ].join("\n");
  }
  return HELP;
}

function findCommand(positionals: readonly string[]): { spec: CommandSpec; args: string[] } {
  const names = [...new Set(COMMANDS.map((spec) => spec.words.join(" ")))].join(", ");
  if (positionals.length === 0)
    throw new UsageError(`no command given (commands: ${names}; see --help)`);
  const spec = COMMANDS.find((candidate) => matches(candidate, positionals) !== undefined);
  if (spec === undefined) {
    const group = COMMANDS.filter((candidate) => candidate.words[0] === positionals[0]);
    if (group.length > 0) {
      const hint =
        positionals[0] === "get" && positionals.length === 2
          ? `; a mesh's VIPs: vips get vips ${positionals[1]}`
          : "";
      throw new UsageError(
        `unknown ${positionals[0]} command ${JSON.stringify(positionals[1] ?? "")} (expected: ${group.map((g) => g.words.join(" ")).join(", ")})${hint}`,
      );
    }
    throw new UsageError(
      `unknown command ${JSON.stringify(positionals[0])} (commands: ${names}; see --help)`,
    );
  }
  const typed = matches(spec, positionals) as readonly string[];
  const args = positionals.slice(typed.length);
  const { min, max } = arity(spec);
  if (args.length < min || (max !== undefined && args.length > max)) {
    const takes = spec.args.length === 0 ? "no arguments" : spec.args.join(" ");
    throw new UsageError(
      `${typed.join(" ")} takes ${takes}, got ${args.length === 0 ? "none" : JSON.stringify(args.join(" "))} (usage: ${usageOf(spec)})`,
    );
  }
  if (args.some((arg) => arg.trim() === "")) {
    throw new UsageError(`${typed.join(" ")}: ${spec.args.join(" ")} must not be empty`);
  }
  return { spec, args };
}

/** Runs one CLI invocation; never calls process.exit (the caller does). */
export async function main(
  argv: readonly string[],
  env: Env = process.env,
  out: Output = consoleOutput,
): Promise<ExitCode> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs explains at length; the first sentence names the problem.
    const first = (error as Error).message.split(/\.\s|\n/)[0] ?? "bad arguments";
    throw new UsageError(`${first} (see --help)`);
  }
  const { values, positionals } = parsed;
  if (values.help === true || positionals[0] === "help") {
    out.line(helpFor(positionals));
    return 0;
  }
  if (values.version === true) {
    out.line(versionLine());
    return 0;
  }
  const { spec, args } = findCommand(positionals);
  const name = spec.words.join(" ");
  if (values.once === true && spec.once !== true) {
    throw new UsageError(`--once applies to demo only, not ${name}`);
  }
  const mesh = values.mesh;
  if (mesh !== undefined && spec.mesh !== true) {
    const owners = COMMANDS.filter((c) => c.mesh === true).map((c) => c.words.join(" "));
    throw new UsageError(`--mesh applies to ${owners.join(", ")} only, not ${name}`);
  }
  if (mesh !== undefined && mesh.trim() === "") throw new UsageError("--mesh must not be empty");
  const flags: Record<string, unknown> = {};
  for (const flag of Object.keys(FLAG_USAGE) as (keyof Flags)[]) {
    const value = values[flag];
    if (value === undefined) continue;
    if (!(spec.flags ?? []).includes(flag)) {
      const owners = COMMANDS.filter((c) => c.flags?.includes(flag)).map((c) => c.words.join(" "));
      const shown = flag === "file" ? "-f" : flag === "output" ? "-o" : `--${flag}`;
      throw new UsageError(`${shown} applies to ${owners.join(", ")} only, not ${name}`);
    }
    flags[flag] = value;
  }
  // Checked before anything is reached, as every other bad usage.
  parseFunctionTimeout(flags["function-timeout"] as string | undefined);
  for (const flag of ["queue-url", "file", "region", "profile"] as const) {
    const value = flag in flags ? flags[flag] : values[flag as "region" | "profile"];
    if (typeof value === "string" && value.trim() === "") {
      throw new UsageError(`--${flag} must not be empty`);
    }
  }
  const json = values.json === true;
  const output = parseOutput(values.output, json);
  const aws = { region: values.region, profile: values.profile };
  const fromFlag = values.endpoint !== undefined;
  const endpointSource = fromFlag ? "--endpoint" : "DYNAMODB_ENDPOINT";

  if (spec.words[0] === "demo") {
    // The demo brings its own local engine unless told where to go with --endpoint.
    const endpoint = fromFlag ? parseEndpoint(values.endpoint as string, "--endpoint") : undefined;
    if (endpoint !== undefined) await ensureReachable(endpoint, "--endpoint");
    return await demoCommand({
      endpoint,
      env,
      json,
      once: values.once === true,
      out,
      functionTimeout: parseFunctionTimeout(values["function-timeout"]),
    });
  }

  const raw = fromFlag ? values.endpoint : env.DYNAMODB_ENDPOINT?.trim() || undefined;
  const endpoint = raw === undefined ? undefined : parseEndpoint(raw, endpointSource);
  prepareEnvironment(env, endpoint, aws);
  let config: AllocatorConfig | undefined;
  const loadSettings = (): AllocatorConfig => {
    config ??= loadConfig(env);
    return config;
  };
  // Settings first: a bad VIP_CIDR is reported before anything touches the tables.
  if (spec.settings === true) loadSettings();
  if (endpoint !== undefined) await ensureReachable(endpoint, endpointSource);
  const ctx = new CliContext(endpoint, env, json, out, output);
  try {
    await ctx.settleRegion();
    return await spec.run(ctx, args, loadSettings, mesh, flags as Flags);
  } catch (error) {
    const status = nonDynamoAnswer(error);
    if (status !== undefined) {
      throw new CliError(
        `${ctx.where()} answered HTTP ${status}, which is not a DynamoDB answer (${explain(error).message}); is it a DynamoDB endpoint?`,
        2,
      );
    }
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && UNREACHABLE.includes(code)) {
      throw new CliError(`cannot reach DynamoDB at ${ctx.where()}: ${explain(error).message}`, 2);
    }
    throw error;
  } finally {
    ctx.close();
  }
}

/** Network errors that mean the endpoint (or AWS) is not reachable from here: exit 2. */
const UNREACHABLE = ["ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT"];

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      endpoint: { type: "string" },
      region: { type: "string" },
      profile: { type: "string" },
      json: { type: "boolean" },
      output: { type: "string", short: "o" },
      file: { type: "string", short: "f" },
      once: { type: "boolean" },
      mesh: { type: "string" },
      all: { type: "boolean" },
      "dry-run": { type: "boolean" },
      "queue-url": { type: "string" },
      redrive: { type: "boolean" },
      "renumber-outside": { type: "boolean" },
      format: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      domain: { type: "string" },
      ttl: { type: "string" },
      interval: { type: "string" },
      force: { type: "boolean" },
      "function-timeout": { type: "string" },
      help: { type: "boolean", short: "h" },
      version: { type: "boolean" },
    },
  });
}

/** One line for any error; the exit code it maps to. */
export function explain(error: unknown): { message: string; exitCode: 1 | 2 } {
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode };
  if (
    isAllocatorError(error) &&
    (error.code === "INVALID_CONFIG" || error.code === "INVALID_CIDR")
  ) {
    return { message: error.message, exitCode: 2 };
  }
  if (error instanceof StreamPollerError) return { message: error.message, exitCode: 1 };
  const name = error instanceof Error ? error.name : "Error";
  const message = error instanceof Error ? error.message : String(error);
  const firstLine = message.split("\n")[0] ?? message;
  if (name === "CredentialsProviderError") {
    const profile = process.env.AWS_PROFILE?.trim();
    return {
      message: `no AWS credentials found${profile ? ` for profile ${profile}` : ""} (${firstLine}); check ~/.aws/credentials and ~/.aws/config or --profile, or pass --endpoint for a local engine`,
      exitCode: 1,
    };
  }
  return { message: `${name}: ${firstLine}`, exitCode: 1 };
}

/** Runs the CLI as the process: prints each line of an error as `error: ...`, exits. */
export function runAsProcess(argv: readonly string[]): void {
  main(argv).then(
    (code) => process.exit(code),
    (error: unknown) => {
      const { message, exitCode } = explain(error);
      for (const line of message.split("\n")) process.stderr.write(`error: ${line}\n`);
      process.exit(exitCode);
    },
  );
}
