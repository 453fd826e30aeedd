import { javaAvailable, startDynamoDbLocal } from "./dynamodb-local.ts";
import { type EmulatorProcess, EmulatorUnavailableError } from "./emulator-process.ts";
import { startMoto } from "./moto.ts";

/**
 * The one switch between the local DynamoDB engines, for everything that starts one: the
 * tests' harness, the CLI's `demo` (`npm start`), the chaos suite and the benches.
 * `VIPS_EMULATOR=moto|dynamodb-local`; unset means {@link DEFAULT_ENGINE}, or moto when
 * DynamoDB Local cannot run here (no Java), with a note saying so (decision 069).
 */

export const ENGINES = ["dynamodb-local", "moto"] as const;
export type EmulatorEngine = (typeof ENGINES)[number];

/** The engine when VIPS_EMULATOR is unset (decision 069: faster to start and to drain). */
export const DEFAULT_ENGINE: EmulatorEngine = "dynamodb-local";

export const ENGINE_NAMES: Readonly<Record<EmulatorEngine, string>> = {
  moto: "moto_server",
  "dynamodb-local": "DynamoDB Local",
};

/** The engine with its version, for benchmark reports. */
export const ENGINE_LABELS: Readonly<Record<EmulatorEngine, string>> = {
  moto: "moto_server 5.2.1 behind the project's one-request-at-a-time lock",
  "dynamodb-local": "DynamoDB Local 1.25.1 (amplify-dynamodb-simulator 2.9.30, in memory)",
};

/** A running local engine and which one it is. */
export interface LocalEmulator extends EmulatorProcess {
  readonly engine: EmulatorEngine;
}

/** VIPS_EMULATOR, checked; undefined when unset or empty. */
export function requestedEngine(
  env: Readonly<Record<string, string | undefined>> = process.env,
): EmulatorEngine | undefined {
  const value = env.VIPS_EMULATOR?.trim();
  if (value === undefined || value === "") return undefined;
  if ((ENGINES as readonly string[]).includes(value)) return value as EmulatorEngine;
  throw new EmulatorUnavailableError(
    `VIPS_EMULATOR=${JSON.stringify(value)} is not one of ${ENGINES.join(", ")}`,
  );
}

/**
 * The engine to start: `engine`, else VIPS_EMULATOR, else the default when it can run here,
 * else moto (`note` is told why). An engine asked for by name that cannot start fails with its
 * install hint rather than silently running the other one.
 */
export async function chooseEngine(
  options: { engine?: EmulatorEngine; note?: (line: string) => void } = {},
): Promise<EmulatorEngine> {
  const chosen = options.engine ?? requestedEngine();
  if (chosen !== undefined) return chosen;
  if (DEFAULT_ENGINE === "dynamodb-local" && !(await javaAvailable())) {
    (options.note ?? ((line) => process.stderr.write(`${line}\n`)))(
      "java not found: using moto_server instead of DynamoDB Local (install a Java runtime 11+, e.g. apt-get install openjdk-17-jre-headless, or set VIPS_EMULATOR=moto)",
    );
    return "moto";
  }
  return DEFAULT_ENGINE;
}

/** Starts the chosen engine (see {@link chooseEngine}) and waits until it serves. */
export async function startEmulator(
  options: { engine?: EmulatorEngine; timeoutMs?: number; note?: (line: string) => void } = {},
): Promise<LocalEmulator> {
  const engine = await chooseEngine(options);
  const timing = options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {};
  const running = engine === "moto" ? await startMoto(timing) : await startDynamoDbLocal(timing);
  return {
    engine,
    endpoint: running.endpoint,
    port: running.port,
    stop: () => running.stop(),
  };
}

export { EmulatorUnavailableError };
