/**
 * The command-line interface: `npm run --silent vips -- COMMAND ...`. Exit codes: 0 ok,
 * 1 the command failed, 2 bad usage (or bad setting) or an unreachable endpoint. Every error
 * is one line on stderr naming what is wrong.
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type AllocatorConfig, loadConfig } from "../../functions/allocator/config.ts";
import { isAllocatorError } from "../../functions/domain/errors.ts";
import { StreamPollerError } from "../local/poller.ts";
import { COMMANDS, type CommandSpec, FLAG_USAGE, type Flags, usageOf } from "./command-table.ts";
import { demoCommand } from "./commands/demo.ts";
import {
  CliContext,
  consoleOutput,
  ensureReachable,
  type Output,
  parseEndpoint,
  parseFunctionTimeout,
  prepareEnvironment,
} from "./context.ts";
import { CliError, type ExitCode, UsageError } from "./errors.ts";

type Env = Record<string, string | undefined>;

export const HELP = [
  "usage: npm run --silent vips -- COMMAND [ARGS] [--endpoint URL] [--json]",
  "",
  "commands:",
  ...COMMANDS.map((spec) => `  ${usageOf(spec).slice(5).padEnd(28)} ${spec.summary}`),
  "",
  "options:",
  "  --endpoint URL   DynamoDB endpoint (a local engine); default $DYNAMODB_ENDPOINT, else real AWS",
  "  --json           machine-readable output on stdout",
  "  --once           demo: exit after the summary instead of watching",
  "  --mesh M         index rebuild/check: one mesh only; adopt: the mesh of a bare VIP config",
  "  --all            reconcile: every mesh (a whole sweep cycle)",
  "  --dry-run        reconcile: report what would be corrected, change nothing; adopt: the plan only",
  "  --renumber-outside  adopt: VIPs outside VIP_CIDR get fresh ones (else the adoption is refused)",
  "  --format F       export: kuma (ConfigMaps, Kuma's origin shape) or json (default)",
  "  --queue-url URL  failures: Lambda's on-failure SQS queue (default: the local file)",
  "  --redrive        failures: reconcile the affected meshes, then remove the entries",
  "  --port, --host   dns: where to listen (default 127.0.0.1:5353, UDP and TCP)",
  "  --domain D       dns, resolve: the zone served (default mesh)",
  "  --ttl S          dns, resolve: TTL of answers (default 30; TTL + interval <= quarantine)",
  "  --interval S     dns: seconds between version probes of the vips table (default 5)",
  "  --force          dns: start even when TTL + interval exceed VIP_QUARANTINE_SECONDS",
  "  --function-timeout S  drain, demo: emulate the function's timeout (passes continue after it)",
  "  -h, --help       this help",
  "",
  "settings (environment): MESHES_TABLE, DATAPLANES_TABLE, VIPS_TABLE, CLAIMS_TABLE,",
  "  VIP_INDEX_TABLE, SERVICE_SET (index, or tables: the full recompute), VIP_CIDR,",
  "  VIP_QUARANTINE_SECONDS, AWS_REGION; local state (checkpoints, failures) in .local/",
  "  (or $VIPS_LOCAL_DIR)",
  "exit codes: 0 ok, 1 failed, 2 bad usage or unreachable endpoint",
].join("\n");

function findCommand(positionals: readonly string[]): { spec: CommandSpec; args: string[] } {
  const names = [...new Set(COMMANDS.map((spec) => spec.words.join(" ")))].join(", ");
  if (positionals.length === 0)
    throw new UsageError(`no command given (commands: ${names}; see --help)`);
  const spec = COMMANDS.find((candidate) =>
    candidate.words.every((word, index) => positionals[index] === word),
  );
  if (spec === undefined) {
    const group = COMMANDS.filter((candidate) => candidate.words[0] === positionals[0]);
    if (group.length > 0) {
      throw new UsageError(
        `unknown ${positionals[0]} command ${JSON.stringify(positionals[1] ?? "")} (expected: ${group.map((g) => g.words.join(" ")).join(", ")})`,
      );
    }
    throw new UsageError(
      `unknown command ${JSON.stringify(positionals[0])} (commands: ${names}; see --help)`,
    );
  }
  const args = positionals.slice(spec.words.length);
  if (spec.variadic !== true && args.length !== spec.args.length) {
    throw new UsageError(
      `${spec.words.join(" ")} takes ${spec.args.length === 0 ? "no arguments" : spec.args.join(" ")}, got ${args.length === 0 ? "none" : JSON.stringify(args.join(" "))} (usage: ${usageOf(spec)})`,
    );
  }
  if (args.some((arg) => arg.trim() === "")) {
    throw new UsageError(`${spec.words.join(" ")}: ${spec.args.join(" ")} must not be empty`);
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
    out.line(HELP);
    return 0;
  }
  const { spec, args } = findCommand(positionals);
  if (values.once === true && spec.once !== true) {
    throw new UsageError(`--once applies to demo only, not ${spec.words.join(" ")}`);
  }
  const mesh = values.mesh;
  if (mesh !== undefined && spec.mesh !== true) {
    const owners = COMMANDS.filter((c) => c.mesh === true).map((c) => c.words.join(" "));
    throw new UsageError(
      `--mesh applies to ${owners.join(", ")} only, not ${spec.words.join(" ")}`,
    );
  }
  if (mesh !== undefined && mesh.trim() === "") throw new UsageError("--mesh must not be empty");
  const flags: Record<string, unknown> = {};
  for (const flag of Object.keys(FLAG_USAGE) as (keyof Flags)[]) {
    const value = values[flag];
    if (value === undefined) continue;
    if (!(spec.flags ?? []).includes(flag)) {
      const owners = COMMANDS.filter((c) => c.flags?.includes(flag)).map((c) => c.words.join(" "));
      throw new UsageError(
        `--${flag} applies to ${owners.join(" and ")} only, not ${spec.words.join(" ")}`,
      );
    }
    flags[flag] = value;
  }
  // Checked before anything is reached, as every other bad usage.
  parseFunctionTimeout(flags["function-timeout"] as string | undefined);
  if (typeof flags["queue-url"] === "string" && flags["queue-url"].trim() === "") {
    throw new UsageError("--queue-url must not be empty");
  }
  const json = values.json === true;
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
  prepareEnvironment(env, endpoint);
  let config: AllocatorConfig | undefined;
  const loadSettings = (): AllocatorConfig => {
    config ??= loadConfig(env);
    return config;
  };
  // Settings first: a bad VIP_CIDR is reported before anything touches the tables.
  if (
    ["drain", "watch", "list", "reconcile", "failures", "dns", "resolve", "adopt"].includes(
      spec.words[0] as string,
    )
  ) {
    loadSettings();
  }
  if (endpoint !== undefined) await ensureReachable(endpoint, endpointSource);
  const ctx = new CliContext(endpoint, env, json, out);
  try {
    return await spec.run(ctx, args, loadSettings, mesh, flags as Flags);
  } finally {
    ctx.close();
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({
    args: [...argv],
    allowPositionals: true,
    strict: true,
    options: {
      endpoint: { type: "string" },
      json: { type: "boolean" },
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
    return {
      message: `no AWS credentials found (${firstLine}); pass --endpoint for a local emulator`,
      exitCode: 1,
    };
  }
  return { message: `${name}: ${firstLine}`, exitCode: 1 };
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      const { message, exitCode } = explain(error);
      process.stderr.write(`error: ${message}\n`);
      process.exit(exitCode);
    },
  );
}
