import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  DescribeTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  ResourceNotFoundException,
} from "@aws-sdk/client-dynamodb";
import type { AllocatorConfig } from "../../functions/allocator/config.ts";
import { DynamoItemClient } from "../../functions/store/dynamo-item-client.ts";
import {
  EXTERNAL_SERVICES_TABLE,
  resolveTableNames,
  type TableNames,
} from "../../functions/store/table-definitions.ts";
import {
  clientConfig,
  EMULATOR_CREDENTIALS,
  hasCredentialsInEnv,
  regionFromEnv,
  resolveRegion,
} from "../local/aws-clients.ts";
import { EmulatorUnavailableError, waitUntilAnswering } from "../local/emulator-process.ts";
import { LocalFunction } from "../local/local-function.ts";
import { StreamPoller, type StreamPollerOptions } from "../local/poller.ts";
import { CliError, CommandFailedError, UsageError } from "./errors.ts";

type Env = Record<string, string | undefined>;

/**
 * The project root: tools/cli/ -> ../.. in a clone, dist/cli/ -> ../.. in the installed package
 * (the bundle, scripts/build.ts).
 */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** True when running from a clone of the repository (not from the installed package). */
export const IN_CLONE = existsSync(join(PROJECT_ROOT, "tools", "cli"));

/**
 * Where local state (checkpoints, the local failure destination) lives: `VIPS_LOCAL_DIR`, else
 * `.local/` in a clone, else `$XDG_STATE_HOME/serverless-vip-allocator` (default
 * `~/.local/state/...`) for the installed CLI, never inside node_modules.
 */
export function localStateDir(env: Env): string {
  const chosen = env.VIPS_LOCAL_DIR?.trim();
  if (chosen) return chosen;
  if (IN_CLONE) return join(PROJECT_ROOT, ".local");
  const state = env.XDG_STATE_HOME?.trim() || join(homedir(), ".local", "state");
  return join(state, "serverless-vip-allocator");
}

/** `--region` and `--profile`: what the AWS CLI's options of the same names mean. */
export interface AwsOptions {
  readonly region?: string | undefined;
  readonly profile?: string | undefined;
}

/** How long `--endpoint` gets to answer before the CLI gives up with exit code 2. */
export const REACHABILITY_TIMEOUT_MS = 2_000;

/** Checks that an endpoint is an http(s) URL; names where it came from when it is not. */
export function parseEndpoint(value: string, source: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(
      `${source} ${JSON.stringify(value)} is not a URL (e.g. http://127.0.0.1:5000)`,
    );
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new UsageError(`${source} ${JSON.stringify(value)} must be an http:// or https:// URL`);
  }
  return value.replace(/\/+$/, "");
}

/**
 * Prepares this process's environment for the SDK clients, the in-process handler and its
 * Powertools telemetry: the endpoint as DYNAMODB_ENDPOINT (what loadConfig reads), `--profile`
 * as AWS_PROFILE and `--region` as AWS_REGION (so every client of the command, and the SDK's
 * default credential chain, use them), a region for a local engine, emulator credentials when
 * an endpoint is used and none are set, warn-level logs on stderr and no EMF metric blobs on
 * stdout. Settings the user exported win, except the endpoint and the two options.
 */
export function prepareEnvironment(
  env: Env,
  endpoint: string | undefined,
  aws: AwsOptions = {},
): void {
  if (endpoint !== undefined) env.DYNAMODB_ENDPOINT = endpoint;
  else delete env.DYNAMODB_ENDPOINT;
  // The local runtime always has the optional external-services table (a deployment on AWS
  // has it only when the function's environment names it).
  if (endpoint !== undefined && !env[EXTERNAL_SERVICES_TABLE.envVar]?.trim()) {
    env[EXTERNAL_SERVICES_TABLE.envVar] = EXTERNAL_SERVICES_TABLE.defaultName;
  }
  // An empty setting is no setting (the SDK would take an empty AWS_REGION as the region).
  for (const key of ["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"]) {
    if (env[key]?.trim() === "") delete env[key];
  }
  if (aws.profile !== undefined) env.AWS_PROFILE = aws.profile;
  if (aws.region !== undefined) env.AWS_REGION = aws.region;
  // Against AWS without a region in the environment, the SDK reads the profile's (settleRegion).
  const region = endpoint !== undefined ? resolveRegion(env) : regionFromEnv(env);
  if (region !== undefined) env.AWS_REGION = region;
  if (endpoint !== undefined && !hasCredentialsInEnv(env)) {
    env.AWS_ACCESS_KEY_ID = EMULATOR_CREDENTIALS.accessKeyId;
    env.AWS_SECRET_ACCESS_KEY = EMULATOR_CREDENTIALS.secretAccessKey;
  }
  env.POWERTOOLS_LOG_LEVEL ??= "WARN";
  env.POWERTOOLS_METRICS_DISABLED ??= "true";
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
}

/**
 * Exit code 2 with the URL when the endpoint does not answer HTTP, or answers a DynamoDB
 * `ListTables` with something that is not DynamoDB's (an HTTP 404 page, HTML).
 */
export async function ensureReachable(endpoint: string, source: string): Promise<void> {
  try {
    await waitUntilAnswering(endpoint, REACHABILITY_TIMEOUT_MS);
  } catch (error) {
    if (!(error instanceof EmulatorUnavailableError)) throw error;
    throw new CliError(
      `cannot reach DynamoDB endpoint ${endpoint} (from ${source}): no answer within ${REACHABILITY_TIMEOUT_MS / 1000} s; is DynamoDB Local or moto_server running there?`,
      2,
    );
  }
  const client = new DynamoDBClient({ ...clientConfig({ endpoint }), maxAttempts: 1 });
  try {
    await client.send(new ListTablesCommand({ Limit: 1 }));
  } catch (error) {
    const status = nonDynamoAnswer(error);
    if (status !== undefined) {
      throw new CliError(
        `${endpoint} (from ${source}) is not a DynamoDB endpoint: it answered ListTables with HTTP ${status} and no DynamoDB error; check the URL`,
        2,
      );
    }
    // A DynamoDB error (credentials, throttling): the command meets it and says so.
  } finally {
    client.destroy();
  }
}

/**
 * The HTTP status of an answer that did not come from DynamoDB (the SDK could not read it as a
 * DynamoDB error: `UnknownError`, or a body that is not JSON); undefined for anything else.
 */
export function nonDynamoAnswer(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { name, $metadata } = error as { name?: unknown; $metadata?: { httpStatusCode?: number } };
  const status = $metadata?.httpStatusCode;
  if (status === undefined) return undefined;
  return name === "Unknown" || name === "UnknownError" || name === "SyntaxError"
    ? status
    : undefined;
}

/** How resources are printed (`-o`). */
export type OutputFormat = "table" | "json" | "yaml";

export interface Output {
  /** A line of the command's result, on stdout. */
  line(text: string): void;
  /** Progress and notes, on stderr (stdout stays parseable with --json). */
  note(text: string): void;
}

export const consoleOutput: Output = {
  line: (text) => process.stdout.write(`${text}\n`),
  note: (text) => process.stderr.write(`${text}\n`),
};

/** Everything a command needs, built once the endpoint and environment are settled. */
export class CliContext {
  readonly tables: TableNames;
  readonly ddb: DynamoDBClient;
  /** Plain values in and out, names as data (`DynamoItemClient`). */
  readonly doc: DynamoItemClient;
  readonly localDir: string;

  constructor(
    readonly endpoint: string | undefined,
    readonly env: Env,
    readonly json: boolean,
    readonly out: Output = consoleOutput,
    /** `-o`: how a command that prints resources prints them (`--json` is `-o json`). */
    readonly output: OutputFormat = json ? "json" : "table",
  ) {
    this.tables = resolveTableNames(env);
    this.ddb = new DynamoDBClient({
      ...clientConfig({ endpoint }, env),
      ...(env.AWS_PROFILE?.trim() ? { profile: env.AWS_PROFILE.trim() } : {}),
      maxAttempts: 3,
    });
    this.doc = new DynamoItemClient(this.ddb);
    this.localDir = localStateDir(env);
  }

  /**
   * Against AWS, the region the SDK settled on (`--region`, the environment, else the
   * profile's), written to AWS_REGION for the command's other clients; exit 2 when there is none.
   */
  async settleRegion(): Promise<void> {
    if (this.endpoint !== undefined || this.env.AWS_REGION) return;
    let region: string | undefined;
    try {
      region = await this.ddb.config.region();
    } catch {
      region = undefined;
    }
    if (!region) {
      const profile = this.env.AWS_PROFILE?.trim() || "default";
      throw new UsageError(
        `no AWS region: pass --region, set AWS_REGION, or give the profile ${profile} a region in ~/.aws/config (or pass --endpoint for a local engine)`,
      );
    }
    this.env.AWS_REGION = region;
  }

  /** The local failure destination (JSON lines). */
  get failureFile(): string {
    return join(this.localDir, "failures.jsonl");
  }

  /** Per endpoint, so two emulators (or real AWS) never share checkpoints. */
  get checkpointFile(): string {
    if (this.endpoint === undefined) {
      return join(this.localDir, `checkpoints-aws-${resolveRegion(this.env)}.json`);
    }
    const url = new URL(this.endpoint);
    const port = url.port || (url.protocol === "https:" ? "443" : "80");
    return join(this.localDir, `checkpoints-${url.hostname}-${port}.json`);
  }

  /**
   * Runs a table operation; a missing table becomes one line naming it: `table`, the one the
   * operation names, when it is missing, else whichever of the command's tables are (an
   * operation over several tables, such as a pass, names none).
   */
  async onTable<T>(table: string | undefined, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof ResourceNotFoundException) {
        const candidates = [table, ...Object.values(this.tables)].filter(
          (name): name is string => name !== undefined,
        );
        const missing = await this.missingTables([...new Set(candidates)]);
        const named = table !== undefined && missing.includes(table) ? [table] : missing;
        if (named.length === 0) throw error;
        const list =
          named.length === 1 ? `table ${named[0]} does not` : `tables ${named.join(", ")} do not`;
        throw new CommandFailedError(
          `${list} exist at ${this.where()}; create ${named.length === 1 ? "it" : "them"} with: tables create`,
        );
      }
      throw error;
    }
  }

  /** Which of `tables` do not exist (one DescribeTable each). */
  async missingTables(tables: readonly string[]): Promise<string[]> {
    const found = await Promise.all(
      tables.map(async (name) => {
        try {
          await this.ddb.send(new DescribeTableCommand({ TableName: name }));
          return undefined;
        } catch (error) {
          if (error instanceof ResourceNotFoundException) return name;
          throw error;
        }
      }),
    );
    return found.filter((name): name is string => name !== undefined);
  }

  /** "http://127.0.0.1:5000" or "AWS us-east-1" (with its profile), for messages. */
  where(): string {
    if (this.endpoint !== undefined) return this.endpoint;
    const profile = this.env.AWS_PROFILE?.trim();
    return `AWS ${resolveRegion(this.env)}${profile ? ` (profile ${profile})` : ""}`;
  }

  close(): void {
    this.ddb.destroy();
  }
}

/**
 * The allocator function in this process, on the context's client: with `timeoutSeconds`, the
 * function's timeout is emulated (each invocation gets Lambda's remaining time, and a pass that
 * runs out goes on in a continuation, decision 160); without, invocations have no time limit.
 */
export function allocatorFunction(
  ctx: CliContext,
  config: AllocatorConfig,
  timeoutSeconds?: number,
): LocalFunction {
  return new LocalFunction(config, {
    client: ctx.ddb,
    timeoutSeconds,
    onNote: (text) => ctx.out.note(text),
  });
}

/** `--function-timeout SECONDS`: a number of seconds from 0.1 to 900 (Lambda's largest). */
export function parseFunctionTimeout(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const seconds = Number(value);
  if (value.trim() === "" || !Number.isFinite(seconds) || seconds < 0.1 || seconds > 900) {
    throw new UsageError(
      `--function-timeout ${JSON.stringify(value)} is not a number of seconds from 0.1 to 900`,
    );
  }
  return seconds;
}

/**
 * The stream poller every command runs: the real handler (in `fn`, the function in this
 * process), the event source settings of the CDK stack, this endpoint's checkpoint and failure
 * files; `options` overrides any of them.
 */
export function allocatorPoller(
  ctx: CliContext,
  config: AllocatorConfig,
  options: Partial<StreamPollerOptions> = {},
  fn: LocalFunction = allocatorFunction(ctx, config),
): StreamPoller {
  return new StreamPoller({
    endpoint: ctx.endpoint,
    tables: config.tables,
    // One SDK client for the whole command: the handler and the poller share the context's.
    client: ctx.ddb,
    handler: fn.streamHandler,
    checkpointFile: ctx.checkpointFile,
    failureFile: ctx.failureFile,
    ...options,
  });
}
