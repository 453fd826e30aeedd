/**
 * What a CLI command is (its words, arguments, options, summary, example and what it runs) and
 * how `--help` prints commands. The list of commands is command-table.ts.
 */
import type { AllocatorConfig } from "../../functions/allocator/config.ts";
import type { DnsFlags } from "./commands/dns.ts";
import type { CliContext } from "./context.ts";
import type { ExitCode } from "./errors.ts";

export interface CommandSpec {
  /** The words that name the command, e.g. ["get", "dataplanes"]. */
  readonly words: readonly string[];
  /** Other words that name it too (kumactl's singular forms: `get dataplane`). */
  readonly aliases?: readonly (readonly string[])[];
  /** Names of its positional arguments, for the usage line; `[NAME]` is optional. */
  readonly args: readonly string[];
  readonly summary: string;
  /** One or more command lines that show it in use (`--help` prints them). */
  readonly examples: readonly string[];
  readonly once?: boolean;
  /** Takes `--mesh M`. */
  readonly mesh?: boolean;
  /** Takes any number of positional arguments (named by `args`, e.g. ["[MESH ...|--all]"]). */
  readonly variadic?: boolean;
  /** The other options it takes (e.g. "all", "dry-run", the DNS options). */
  readonly flags?: readonly (keyof Flags)[];
  /** Reads the allocator's settings (VIP_CIDR, ...) before touching any table. */
  readonly settings?: boolean;
  readonly run: (
    ctx: CliContext,
    args: readonly string[],
    config: () => AllocatorConfig,
    mesh: string | undefined,
    flags: Flags,
  ) => Promise<ExitCode>;
}

/** Options that only some commands take. */
export interface Flags extends DnsFlags {
  readonly all?: boolean;
  readonly "dry-run"?: boolean;
  readonly "queue-url"?: string;
  readonly redrive?: boolean;
  readonly "renumber-outside"?: boolean;
  readonly format?: string;
  readonly file?: string;
  readonly output?: string;
  readonly "function-timeout"?: string;
}

/** How each option shows in a command's usage line ("" = named by the arguments already). */
export const FLAG_USAGE: Record<keyof Flags, string> = {
  file: "-f FILE|-",
  all: "",
  "dry-run": "[--dry-run]",
  "queue-url": "[--queue-url URL]",
  redrive: "[--redrive]",
  "renumber-outside": "[--renumber-outside]",
  format: "[--format kuma|kuma-origin|json]",
  output: "[-o table|json|yaml]",
  port: "[--port 5353]",
  host: "[--host 127.0.0.1]",
  domain: "[--domain mesh]",
  ttl: "[--ttl 30]",
  interval: "[--interval 5]",
  force: "[--force]",
  "function-timeout": "[--function-timeout SECONDS]",
};

/** What each option does, for a command's `--help`. */
export const FLAG_HELP: Record<keyof Flags | "mesh" | "once", string> = {
  file: "-f, --file FILE   the YAML or JSON file to read; - reads stdin",
  all: "--all             every mesh (a whole sweep cycle)",
  "dry-run": "--dry-run         change nothing: only say what would be done",
  "queue-url": "--queue-url URL   the Lambda's on-failure SQS queue (default: the local file)",
  redrive: "--redrive         reconcile the affected meshes, then remove the entries",
  "renumber-outside": "--renumber-outside  VIPs outside VIP_CIDR get fresh ones (else refused)",
  format:
    "--format F        kuma (ConfigMaps as current Kuma reads them), kuma-origin (Kuma's 2020 flat map) or json (default)",
  output: "-o, --output F    table (default), json or yaml",
  port: "--port N          where to listen (default 5353; 0 = a free port)",
  host: "--host H          the address to listen on (default 127.0.0.1)",
  domain: "--domain D        the zone served (default mesh)",
  ttl: "--ttl S           TTL of answers (default 30; TTL + interval <= quarantine)",
  interval: "--interval S      seconds between version probes of the vips table (default 5)",
  force: "--force           start even when TTL + interval exceed VIP_QUARANTINE_SECONDS",
  "function-timeout":
    "--function-timeout S  emulate the function's timeout of S seconds (passes continue after it)",
  mesh: "--mesh M          the mesh (default: every mesh when listing, `default` for one resource)",
  once: "--once            exit after the summary instead of watching",
};

export const GLOBAL_OPTIONS = [
  "--endpoint URL   a DynamoDB endpoint (a local engine); default $DYNAMODB_ENDPOINT, else AWS",
  "--region R       the AWS region (default: AWS_REGION, else the profile's)",
  "--profile P      the AWS profile of ~/.aws/config and ~/.aws/credentials (AWS_PROFILE)",
  "--json           machine-readable output on stdout (for resources: -o json)",
  "-h, --help       help (vips COMMAND --help: one command's, with an example)",
  "--version        the version of the package",
];

/** The words of a command line that name a command: its name or one of its aliases. */
export function namesOf(spec: CommandSpec): readonly (readonly string[])[] {
  return [spec.words, ...(spec.aliases ?? [])];
}

/** How many arguments a command takes at least and at most (undefined: any number). */
export function arity(spec: CommandSpec): { min: number; max: number | undefined } {
  if (spec.variadic === true) return { min: 0, max: undefined };
  const optional = spec.args.filter((arg) => arg.startsWith("[")).length;
  return { min: spec.args.length - optional, max: spec.args.length };
}

export const usageOf = (spec: CommandSpec): string =>
  [
    "vips",
    ...spec.words,
    ...spec.args,
    ...(spec.flags?.includes("file") ? [FLAG_USAGE.file] : []),
    ...(spec.once ? ["[--once]"] : []),
    ...(spec.mesh ? ["[--mesh M]"] : []),
    ...(spec.flags ?? []).filter((flag) => flag !== "file").map((flag) => FLAG_USAGE[flag]),
  ]
    .filter((word) => word !== "")
    .join(" ");

/** One command's `--help`: usage, what it does, its options, examples. */
export function commandHelp(spec: CommandSpec): string {
  const options = [
    ...(spec.flags ?? []),
    ...(spec.mesh ? (["mesh"] as const) : []),
    ...(spec.once ? (["once"] as const) : []),
  ].map((flag) => `  ${FLAG_HELP[flag]}`);
  const aliases = (spec.aliases ?? []).map((words) => `vips ${words.join(" ")}`);
  return [
    `usage: ${usageOf(spec)}`,
    "",
    `${spec.summary}.`,
    ...(aliases.length > 0 ? ["", `also: ${aliases.join(", ")}`] : []),
    ...(options.length > 0 ? ["", "options:", ...options] : []),
    "",
    "examples:",
    ...spec.examples.map((example) => `  ${example}`),
    "",
    "global options: see vips --help",
  ].join("\n");
}

/**
 * The CLI's commands as the Markdown table of docs/local.md: each command's usage line (as
 * `--help` prints it) and its summary. The docs test compares the two, so the table is the help.
 */
export function commandTableMarkdown(commands: readonly CommandSpec[]): string {
  const rows = [
    ["command", "what it does"],
    ...commands.map((spec) => [`\`${usageOf(spec).slice("vips ".length)}\``, spec.summary]),
  ].map((row) => row.map((cell) => cell.replaceAll("|", "\\|")));
  const widths = [0, 1].map((column) => Math.max(...rows.map((row) => (row[column] ?? "").length)));
  const line = (cells: readonly string[]) =>
    `| ${cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join(" | ")} |`;
  return [
    line(rows[0] as string[]),
    `| ${widths.map((width) => "-".repeat(width)).join(" | ")} |`,
    ...rows.slice(1).map(line),
  ].join("\n");
}
