#!/usr/bin/env node
// Idempotent set-up run before `npm start` and `npm test` (npm's pre-scripts), so that both
// quick-start commands work on a fresh clone: installs node_modules from the lockfile when they
// are missing or stale, and moto_server (a local DynamoDB + Streams emulator) when missing; checks
// for the Java runtime the other local engine, DynamoDB Local (an npm devDependency), needs.
// Plain Node, no dependencies: it runs before anything is installed. On a Node older than the
// project's (package.json `engines`), it says so in one line and goes on.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const stamp = join(root, "node_modules", ".setup-lock-hash");
const say = (line) => process.stderr.write(`[setup] ${line}\n`);

// The Lambda runtime is Node 24 (infra/allocator-bundling.ts); the AWS SDK's releases after
// January 2027 need Node 22. One line here instead of the SDK's warning stack on every command
// (the CLI and the tests silence that warning, see tools/cli/context.ts, vitest.config.ts).
function checkNodeVersion() {
  const major = Number(process.versions.node.split(".")[0]);
  if (major >= 22) return;
  say(
    `Node ${process.version} is older than this project supports (Node 22 or later; Node 24 is the Lambda runtime): install Node 24 (for example \`npm install --prefix ~/node24 node-${process.platform}-${process.arch}@24\`, then put ~/node24/node_modules/node-${process.platform}-${process.arch}/bin first on PATH); trying anyway`,
  );
}

function lockHash() {
  return createHash("sha256")
    .update(readFileSync(join(root, "package-lock.json")))
    .digest("hex");
}

function ensureNodeModules() {
  const want = lockHash();
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === want) return;
  say("installing npm dependencies from package-lock.json (npm ci) ...");
  execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
  writeFileSync(stamp, want);
}

// The local emulator runs as `$PYTHON tools/local/moto_serial_server.py` (see
// tools/local/moto.ts), so what it needs is moto importable by that interpreter.
function ensureMoto() {
  const python = process.env.PYTHON ?? "python3";
  const probe = spawnSync(python, ["-c", "import moto.server"], { stdio: "ignore" });
  if (probe.status === 0) return;
  say('installing moto_server: pip install "moto[server]==5.2.1" ...');
  const pip = spawnSync(python, ["-m", "pip", "install", "--quiet", "moto[server]==5.2.1"], {
    stdio: "inherit",
  });
  if (pip.status !== 0) {
    say('could not install moto; install it by hand: pip install "moto[server]==5.2.1"');
    process.exit(1);
  }
}

checkNodeVersion();
// DynamoDB Local comes with the npm packages (amplify-dynamodb-simulator); it needs Java. Without
// it everything runs on moto_server alone (tools/local/emulator.ts, vitest.config.ts).
function checkJava() {
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, "bin", "java") : "java";
  const probe = spawnSync(java, ["-version"], { stdio: "ignore" });
  if (probe.status === 0) return;
  say(
    "java not found: DynamoDB Local needs a Java runtime 11+ (Debian/Ubuntu: apt-get install openjdk-17-jre-headless); until then npm start and npm test use moto_server alone",
  );
}

ensureNodeModules();
ensureMoto();
checkJava();
