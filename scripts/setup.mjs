#!/usr/bin/env node
// Idempotent set-up run before `npm start` and `npm test` (npm's pre-scripts), so that both
// quick-start commands work on a fresh clone: installs node_modules from the lockfile when they
// are missing or stale, and moto_server (the local DynamoDB + Streams emulator) when missing.
// Plain Node, no dependencies: it runs before anything is installed.
import { execFileSync, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const stamp = join(root, "node_modules", ".setup-lock-hash");
const say = (line) => process.stderr.write(`[setup] ${line}\n`);

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

// The local emulator runs as `$PYTHON functions/local/moto_serial_server.py` (see
// functions/local/moto.ts), so what it needs is moto importable by that interpreter.
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

ensureNodeModules();
ensureMoto();
