import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type EmulatorProcess,
  EmulatorUnavailableError,
  spawnEmulator,
} from "./emulator-process.ts";
import { MOTO_INSTALL_HINT } from "./moto.ts";

/** A single-file Java program that starts DynamoDB Local on 127.0.0.1 only (Java 11+). */
const LOOPBACK_LAUNCHER = fileURLToPath(new URL("./LoopbackDynamoDbLocal.java", import.meta.url));

/**
 * DynamoDB Local, AWS's own engine for local use (a Java program; it serves DynamoDB Streams on
 * the same port), as shipped in the pinned devDependency `amplify-dynamodb-simulator`
 * (`emulator/DynamoDBLocal.jar` with `DynamoDBLocal_lib/`, DynamoDB Local 1.25.1).
 * `DYNAMODB_LOCAL_DIR` names another directory holding `DynamoDBLocal.jar` and its lib folder.
 */

/** The pinned devDependency that ships DynamoDB Local (package.json). */
export const DYNAMODB_LOCAL_PACKAGE_VERSION = "2.9.30";

export const JAVA_INSTALL_HINT =
  "install a Java runtime (11 or later; Debian/Ubuntu: apt-get install openjdk-17-jre-headless)";

/** `$JAVA_HOME/bin/java` when JAVA_HOME is set, else `java` from PATH. */
export function javaCommand(env: NodeJS.ProcessEnv = process.env): string {
  return env.JAVA_HOME ? join(env.JAVA_HOME, "bin", "java") : "java";
}

let javaProbe: Promise<boolean> | undefined;

/** Whether `java -version` runs (asked once per process). */
export async function javaAvailable(): Promise<boolean> {
  javaProbe ??= new Promise((resolve) => {
    execFile(javaCommand(), ["-version"], { timeout: 30_000 }, (error) => resolve(error === null));
  });
  return await javaProbe;
}

/** The directory holding DynamoDBLocal.jar, or undefined when the package is not installed. */
export function dynamoDbLocalDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.DYNAMODB_LOCAL_DIR) return env.DYNAMODB_LOCAL_DIR;
  try {
    const require = createRequire(import.meta.url);
    const dir = join(
      dirname(require.resolve("amplify-dynamodb-simulator/package.json")),
      "emulator",
    );
    return existsSync(join(dir, "DynamoDBLocal.jar")) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts DynamoDB Local in memory on a free port and waits until it serves ListTables.
 * `-sharedDb`: one database whatever the client's credentials and region (as with moto);
 * `-disableTelemetry`: it would otherwise try to reach AWS. A small heap and the serial
 * collector keep two of them (the test workers') light on a small machine; the benches at
 * 100,000 dataplanes set `DYNAMODB_LOCAL_HEAP` (e.g. `4g`: the tables and their stream records
 * are held in memory).
 */
export async function startDynamoDbLocal(
  options: { timeoutMs?: number } = {},
): Promise<EmulatorProcess> {
  const dir = dynamoDbLocalDir();
  const java = javaCommand();
  if (dir === undefined) {
    throw new EmulatorUnavailableError(
      `DynamoDB Local is not installed: in a clone of the repository run npm ci; beside the installed CLI run npm install amplify-dynamodb-simulator@${DYNAMODB_LOCAL_PACKAGE_VERSION} (it needs Java 11+); or set DYNAMODB_LOCAL_DIR to a folder with DynamoDBLocal.jar; or VIPS_EMULATOR=moto with ${MOTO_INSTALL_HINT}; or pass --endpoint URL of an engine already running`,
    );
  }
  return await spawnEmulator({
    name: "DynamoDB Local",
    command: java,
    args: (port) => [
      "-XX:+UseSerialGC",
      `-Xmx${heapSize(process.env.DYNAMODB_LOCAL_HEAP)}`,
      `-Djava.library.path=${join(dir, "DynamoDBLocal_lib")}`,
      // Through a launcher that binds it to 127.0.0.1: DynamoDB Local itself has no option for
      // its address and listens on every interface.
      "-cp",
      [join(dir, "DynamoDBLocal.jar"), join(dir, "DynamoDBLocal_lib", "*")].join(delimiter),
      LOOPBACK_LAUNCHER,
      "-inMemory",
      "-sharedDb",
      "-disableTelemetry",
      "-port",
      String(port),
    ],
    cwd: dir,
    notFound: `${java} not found: DynamoDB Local needs Java; ${JAVA_INSTALL_HINT}`,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  });
}

/** The JVM heap for DynamoDB Local: `DYNAMODB_LOCAL_HEAP` (`512m`, `4g`), default 1 GB. */
function heapSize(value: string | undefined): string {
  const given = value?.trim() ?? "";
  if (given === "") return "1g";
  if (!/^[1-9][0-9]*[mg]$/.test(given)) {
    throw new EmulatorUnavailableError(
      `DYNAMODB_LOCAL_HEAP ${JSON.stringify(given)} is not a heap size such as 512m or 4g`,
    );
  }
  return given;
}
