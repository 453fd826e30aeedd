import { fileURLToPath } from "node:url";
import {
  type EmulatorProcess,
  EmulatorUnavailableError,
  freeLoopbackPort,
  spawnEmulator,
  waitUntilAnswering,
} from "./emulator-process.ts";

/** A running moto_server (DynamoDB + DynamoDB Streams) on a loopback port. */
export type MotoServer = EmulatorProcess;

// What the callers of this module used before the second engine (emulator.ts) existed.
export { EmulatorUnavailableError as MotoUnavailableError, freeLoopbackPort, waitUntilAnswering };

export const MOTO_INSTALL_HINT = 'pip install "moto[server]==5.2.1"';

/**
 * moto_server's app behind a one-request-at-a-time lock (see the file): without it moto's
 * conditional writes are not atomic under concurrent requests. `MOTO_SERVER_COMMAND` may name
 * another launcher taking `-H HOST -p PORT` (e.g. plain `moto_server`).
 */
const SERIAL_LAUNCHER = fileURLToPath(new URL("./moto_serial_server.py", import.meta.url));

/**
 * Starts moto on a free 127.0.0.1 port and waits until it serves ListTables: by default the
 * serial launcher under `$PYTHON` (default `python3`, the interpreter the set-up installs moto
 * for); `MOTO_SERVER_COMMAND` (e.g. `moto_server`) runs another server binary instead. The
 * process is killed by `stop()` and, as a safety net, when this Node process exits.
 */
export async function startMoto(
  options: { command?: string; timeoutMs?: number } = {},
): Promise<MotoServer> {
  const server = options.command ?? process.env.MOTO_SERVER_COMMAND;
  const command = server ?? process.env.PYTHON ?? "python3";
  const launcher = server === undefined ? [SERIAL_LAUNCHER] : [];
  return await spawnEmulator({
    name: "moto_server",
    command,
    args: (port) => [...launcher, "-H", "127.0.0.1", "-p", String(port)],
    env: { ...process.env, AWS_DEFAULT_REGION: process.env.AWS_DEFAULT_REGION ?? "us-east-1" },
    notFound: `${command} not found on PATH; install it with: ${MOTO_INSTALL_HINT}`,
    explainExit: (stderr) =>
      /No module named '(moto|werkzeug)/.test(stderr)
        ? `moto is not installed for ${command}; install it with: ${MOTO_INSTALL_HINT}`
        : undefined,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  });
}
