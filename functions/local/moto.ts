import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";

/** A running moto_server (DynamoDB + DynamoDB Streams) on a loopback port. */
export interface MotoServer {
  readonly endpoint: string;
  readonly port: number;
  stop(): Promise<void>;
}

export class MotoUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MotoUnavailableError";
  }
}

export const MOTO_INSTALL_HINT = 'pip install "moto[server]==5.2.1"';

/**
 * moto_server's app behind a one-request-at-a-time lock (see the file): without it moto's
 * conditional writes are not atomic under concurrent requests. `MOTO_SERVER_COMMAND` may name
 * another launcher taking `-H HOST -p PORT` (e.g. plain `moto_server`).
 */
const SERIAL_LAUNCHER = fileURLToPath(new URL("./moto_serial_server.py", import.meta.url));

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

/** Resolves when `endpoint` answers HTTP, rejects after `timeoutMs`. */
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
  throw new MotoUnavailableError(
    `${endpoint} did not answer within ${timeoutMs} ms: ${lastError instanceof Error ? lastError.message : String(lastError)}`,
  );
}

/**
 * Starts moto on a free 127.0.0.1 port and waits until it answers: by default the serial
 * launcher under `$PYTHON` (default `python3`, the interpreter the set-up installs moto for);
 * `MOTO_SERVER_COMMAND` (e.g. `moto_server`) runs another server binary instead. The process
 * is killed by `stop()` and, as a safety net, when this Node process exits.
 */
export async function startMoto(
  options: { command?: string; timeoutMs?: number } = {},
): Promise<MotoServer> {
  const server = options.command ?? process.env.MOTO_SERVER_COMMAND;
  const command = server ?? process.env.PYTHON ?? "python3";
  const args = server === undefined ? [SERIAL_LAUNCHER] : [];
  const port = await freeLoopbackPort();
  const child: ChildProcess = spawn(command, [...args, "-H", "127.0.0.1", "-p", String(port)], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, AWS_DEFAULT_REGION: process.env.AWS_DEFAULT_REGION ?? "us-east-1" },
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4_000);
  });
  const spawnFailure = new Promise<never>((_, reject) => {
    child.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        new MotoUnavailableError(
          error.code === "ENOENT"
            ? `${command} not found on PATH; install it with: ${MOTO_INSTALL_HINT}`
            : `could not start ${command}: ${error.message}`,
        ),
      );
    });
    child.once("exit", (code) => {
      reject(
        new MotoUnavailableError(
          /No module named '(moto|werkzeug)/.test(stderr)
            ? `moto is not installed for ${command}; install it with: ${MOTO_INSTALL_HINT}`
            : `${command} exited with code ${code}: ${stderr.trim().split("\n").slice(-3).join(" | ")}`,
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
    await Promise.race([waitUntilAnswering(endpoint, options.timeoutMs ?? 20_000), spawnFailure]);
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
