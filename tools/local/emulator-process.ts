import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { DynamoDBClient, ListTablesCommand } from "@aws-sdk/client-dynamodb";

/**
 * What the two local DynamoDB engines (moto_server and DynamoDB Local, see emulator.ts) share:
 * a child process on a free loopback port, considered up once it answers a real DynamoDB call,
 * and stopped with the Node process that started it.
 */

/** A running local DynamoDB + DynamoDB Streams engine. */
export interface EmulatorProcess {
  readonly endpoint: string;
  readonly port: number;
  stop(): Promise<void>;
}

/** The engine could not be started or did not serve in time; the message says what to do. */
export class EmulatorUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EmulatorUnavailableError";
  }
}

/**
 * How long an engine gets to serve its first ListTables. Generous: a JVM or a Python process
 * starting while the machine runs a test suite on every core can take tens of seconds.
 */
export const DEFAULT_START_TIMEOUT_MS = 90_000;

/** Asks the OS for a free port on 127.0.0.1. */
export async function freeLoopbackPort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => {
        if (address !== null && typeof address === "object") resolve(address.port);
        else reject(new Error("could not read the port of a probe socket"));
      });
    });
  });
}

const errorText = (error: unknown): string =>
  error instanceof Error ? `${error.name}: ${error.message}` : String(error);

/** Resolves when `endpoint` answers HTTP at all, rejects after `timeoutMs`. */
export async function waitUntilAnswering(endpoint: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(endpoint, { signal: AbortSignal.timeout(1_000) });
      await response.arrayBuffer();
      return;
    } catch (error) {
      lastError = error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new EmulatorUnavailableError(
    `${endpoint} did not answer within ${timeoutMs} ms: ${errorText(lastError)}`,
  );
}

/**
 * Resolves once `endpoint` serves a DynamoDB ListTables (an HTTP answer alone is not enough: a
 * server can answer before its DynamoDB API is ready); rejects after `timeoutMs`.
 */
export async function waitUntilServing(
  endpoint: string,
  timeoutMs = DEFAULT_START_TIMEOUT_MS,
): Promise<void> {
  const client = new DynamoDBClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
    maxAttempts: 1,
  });
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  try {
    while (Date.now() < deadline) {
      try {
        const left = Math.max(1, deadline - Date.now());
        await client.send(new ListTablesCommand({ Limit: 1 }), {
          abortSignal: AbortSignal.timeout(Math.min(10_000, left)),
        });
        return;
      } catch (error) {
        lastError = error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } finally {
    client.destroy();
  }
  throw new EmulatorUnavailableError(
    `${endpoint} did not serve ListTables within ${timeoutMs} ms: ${errorText(lastError)}`,
  );
}

export interface SpawnEmulatorOptions {
  /** The engine's name in messages ("moto_server", "DynamoDB Local"). */
  readonly name: string;
  readonly command: string;
  /** The arguments, given the port to listen on. */
  readonly args: (port: number) => string[];
  readonly cwd?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** The message when `command` is not on PATH. */
  readonly notFound: string;
  /** A better message for an early exit, from the tail of the process's stderr, if it knows one. */
  readonly explainExit?: (stderr: string) => string | undefined;
  readonly timeoutMs?: number;
}

/**
 * Starts an engine on a free 127.0.0.1 port and waits until it serves ListTables. The process
 * is killed by `stop()` and, as a safety net, when this Node process exits. Its stderr is read
 * continuously (an undrained pipe would block the engine) and its tail kept for messages.
 */
export async function spawnEmulator(options: SpawnEmulatorOptions): Promise<EmulatorProcess> {
  const port = await freeLoopbackPort();
  const child: ChildProcess = spawn(options.command, options.args(port), {
    stdio: ["ignore", "ignore", "pipe"],
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    env: options.env ?? process.env,
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const spawnFailure = new Promise<never>((_, reject) => {
    child.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        new EmulatorUnavailableError(
          error.code === "ENOENT"
            ? options.notFound
            : `could not start ${options.name} (${options.command}): ${error.message}`,
        ),
      );
    });
    child.once("exit", (code, signal) => {
      reject(
        new EmulatorUnavailableError(
          options.explainExit?.(stderr) ??
            `${options.name} (${options.command}) exited with ${code ?? signal}: ${stderr.trim().split("\n").slice(-3).join(" | ")}`,
        ),
      );
    });
  });
  const killOnExit = (): void => {
    child.kill("SIGKILL");
  };
  process.once("exit", killOnExit);
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await Promise.race([
      waitUntilServing(endpoint, options.timeoutMs ?? DEFAULT_START_TIMEOUT_MS),
      spawnFailure,
    ]);
  } catch (error) {
    child.kill("SIGKILL");
    process.removeListener("exit", killOnExit);
    throw error;
  }
  spawnFailure.catch(() => undefined);
  return {
    endpoint,
    port,
    async stop() {
      process.removeListener("exit", killOnExit);
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
