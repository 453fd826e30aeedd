import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { DynamoDBClient, ResourceNotFoundException } from "@aws-sdk/client-dynamodb";
import type { AllocatorConfig } from "../../functions/allocator/config.ts";
import { DocumentClient } from "../../functions/store/document-client.ts";
import {
  EXTERNAL_SERVICES_TABLE,
  resolveTableNames,
  type TableNames,
} from "../../functions/store/table-definitions.ts";
import {
  clientConfig,
  EMULATOR_CREDENTIALS,
  hasCredentialsInEnv,
  resolveRegion,
} from "../local/aws-clients.ts";
import { EmulatorUnavailableError, waitUntilAnswering } from "../local/emulator-process.ts";
import { LocalFunction } from "../local/local-function.ts";
import { StreamPoller, type StreamPollerOptions } from "../local/poller.ts";
import { CliError, CommandFailedError, UsageError } from "./errors.ts";

type Env = Record<string, string | undefined>;

/** The project root (tools/cli/ -> ../..), where `.local/` lives. */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

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
 * Powertools telemetry: the endpoint as DYNAMODB_ENDPOINT (what loadConfig reads), a region,
 * emulator credentials when an endpoint is used and none are set, warn-level logs on stderr and
 * no EMF metric blobs on stdout. Settings the user exported win, except the endpoint.
 */
export function prepareEnvironment(env: Env, endpoint: string | undefined): void {
  if (endpoint !== undefined) env.DYNAMODB_ENDPOINT = endpoint;
  else delete env.DYNAMODB_ENDPOINT;
  // The local runtime always has the optional external-services table (a deployment on AWS
  // has it only when the function's environment names it).
  if (endpoint !== undefined && !env[EXTERNAL_SERVICES_TABLE.envVar]?.trim()) {
    env[EXTERNAL_SERVICES_TABLE.envVar] = EXTERNAL_SERVICES_TABLE.defaultName;
  }
  env.AWS_REGION = resolveRegion(env);
  if (endpoint !== undefined && !hasCredentialsInEnv(env)) {
    env.AWS_ACCESS_KEY_ID = EMULATOR_CREDENTIALS.accessKeyId;
    env.AWS_SECRET_ACCESS_KEY = EMULATOR_CREDENTIALS.secretAccessKey;
  }
  env.POWERTOOLS_LOG_LEVEL ??= "WARN";
  env.POWERTOOLS_METRICS_DISABLED ??= "true";
  env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
}

/** Exit code 2 with the URL when the endpoint does not answer HTTP. */
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
}

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
  /** Plain values in and out, names as data (the project's document client). */
  readonly doc: DocumentClient;
  readonly localDir: string;

  constructor(
    readonly endpoint: string | undefined,
    readonly env: Env,
    readonly json: boolean,
    readonly out: Output = consoleOutput,
  ) {
    this.tables = resolveTableNames(env);
    this.ddb = new DynamoDBClient({ ...clientConfig({ endpoint }, env), maxAttempts: 3 });
    this.doc = new DocumentClient(this.ddb);
    this.localDir = env.VIPS_LOCAL_DIR?.trim() || join(PROJECT_ROOT, ".local");
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

  /** Runs a table operation; a missing table becomes one line naming it. */
  async onTable<T>(table: string, operation: () => Promise<T>): Promise<T> {
    try {
      return await operation();
    } catch (error) {
      if (error instanceof ResourceNotFoundException) {
        throw new CommandFailedError(
          `table ${table} does not exist at ${this.where()}; create it with: tables create`,
        );
      }
      throw error;
    }
  }

  /** "http://127.0.0.1:5000" or "AWS us-east-1", for messages. */
  where(): string {
    return this.endpoint ?? `AWS ${resolveRegion(this.env)}`;
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
