/**
 * The two local engines side by side (not a test): for DynamoDB Local and moto_server, in one
 * run, on this machine,
 * - start-up: from spawning the engine to its first answered ListTables (tools/local/
 *   emulator-process.ts), RUNS times each;
 * - the demo: `vips demo --once` (what `npm start` runs, without the watch) as a separate
 *   process, from spawn to exit, and its drain alone (from the "seeded" line to the
 *   "processed" line of its output);
 * - a drain of 1,000 dataplanes (bench/drain-1000.ts: the CLI's `drain` as a process);
 * - chaos seeds on the engine (`npm run chaos -- --emulator`: seeds 1-10, 30 steps each).
 * Writes bench/results/engines.md.
 *
 *   npm run bench:engines [-- RUNS]
 */
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, totalmem } from "node:os";
import { type EmulatorEngine, ENGINE_LABELS, ENGINE_NAMES } from "../tools/local/emulator.ts";

const RUNS = Number(process.argv[2] ?? 3);
const ENGINES: EmulatorEngine[] = ["dynamodb-local", "moto"];

interface Timed {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly seconds: number;
  /** Seconds from spawn at which each stderr line was seen. */
  readonly lines: Array<{ at: number; text: string }>;
}

/** Runs `node --import tsx ARGS` with VIPS_EMULATOR=engine, timing it and its stderr lines. */
function run(engine: EmulatorEngine, args: string[]): Promise<Timed> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", ...args], {
      env: { ...process.env, VIPS_EMULATOR: engine },
    });
    let stdout = "";
    let stderr = "";
    const lines: Timed["lines"] = [];
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      const at = (performance.now() - start) / 1000;
      stderr += chunk.toString();
      for (const text of chunk.toString().split("\n")) if (text !== "") lines.push({ at, text });
    });
    child.on("error", reject);
    child.on("close", (code) =>
      resolve({ code, stdout, stderr, lines, seconds: (performance.now() - start) / 1000 }),
    );
  });
}

function check(result: Timed, what: string): Timed {
  if (result.code !== 0) {
    throw new Error(`${what} exited ${result.code}:\n${result.stdout}\n${result.stderr}`);
  }
  return result;
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

const START_PROBE = `
import { startEmulator } from "./tools/local/emulator.ts";
const t0 = performance.now();
const engine = await startEmulator();
const ms = performance.now() - t0;
await engine.stop();
console.log(ms.toFixed(0));
`;

interface Row {
  engine: EmulatorEngine;
  startMs: number[];
  demoSeconds: number;
  demoDrainSeconds: number;
  drain1000Seconds: number;
  drain1000Line: string;
  chaosSeconds: number;
  chaosLine: string;
}

const rows: Row[] = [];
for (const engine of ENGINES) {
  console.error(`${ENGINE_NAMES[engine]}: start-up x${RUNS} ...`);
  const startMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const probe = check(await run(engine, ["--input-type=module", "-e", START_PROBE]), "start");
    startMs.push(Number(probe.stdout.trim()));
  }
  console.error(`${ENGINE_NAMES[engine]}: demo ...`);
  const demo = check(await run(engine, ["tools/cli/bin.ts", "demo", "--once"]), "demo");
  const seeded = demo.lines.find((line) => line.text.startsWith("seeded "))?.at ?? Number.NaN;
  const processed = demo.lines.find((line) => line.text.startsWith("processed "))?.at ?? Number.NaN;
  console.error(`${ENGINE_NAMES[engine]}: drain of 1,000 dataplanes ...`);
  const drain = check(await run(engine, ["bench/drain-1000.ts"]), "drain-1000");
  const drainLine = drain.stdout.trim();
  const drainSeconds = Number(/drain \(CLI process[^)]*\): ([\d.]+) s/.exec(drainLine)?.[1]);
  console.error(`${ENGINE_NAMES[engine]}: chaos seeds ...`);
  const chaos = check(
    await run(engine, ["test/chaos/run.ts", "--emulator", "--runs", "10", "--steps", "30"]),
    "chaos",
  );
  const chaosLine = chaos.stdout.trim().split("\n").slice(-2).join("; ");
  const chaosSeconds = Number(/, ([\d.]+) s$/.exec(chaos.stdout.trim())?.[1]);
  rows.push({
    engine,
    startMs,
    demoSeconds: demo.seconds,
    demoDrainSeconds: processed - seeded,
    drain1000Seconds: drainSeconds,
    drain1000Line: drainLine,
    chaosSeconds,
    chaosLine,
  });
}

const machine = `${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? "?"}), ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
const cell = (f: (row: Row) => string) => rows.map(f).join(" | ");
const md = [
  "# The two local engines side by side",
  "",
  `Run ${new Date().toISOString()} with \`npm run bench:engines -- ${RUNS}\` on ${machine}, one engine after the other.`,
  "",
  `| | ${cell((r) => ENGINE_NAMES[r.engine])} |`,
  `| --- | ${cell(() => "---:")} |`,
  `| start-up to the first ListTables, median of ${RUNS} (all runs) | ${cell((r) => `${(median(r.startMs) / 1000).toFixed(1)} s (${r.startMs.map((ms) => (ms / 1000).toFixed(1)).join(", ")})`)} |`,
  `| \`vips demo --once\` (npm start without the watch), spawn to exit | ${cell((r) => `${r.demoSeconds.toFixed(1)} s`)} |`,
  `| of which the demo's drain (53 records) | ${cell((r) => `${r.demoDrainSeconds.toFixed(1)} s`)} |`,
  `| drain of 1,000 dataplanes in 10 meshes (bench/drain-1000.ts) | ${cell((r) => `${r.drain1000Seconds.toFixed(1)} s`)} |`,
  `| 10 chaos seeds of 30 steps on the engine | ${cell((r) => `${r.chaosSeconds.toFixed(1)} s`)} |`,
  "",
  ...rows.map(
    (r) =>
      `- ${ENGINE_LABELS[r.engine]}: drain-1000 said "${r.drain1000Line}"; chaos said "${r.chaosLine}".`,
  ),
  "",
].join("\n");
mkdirSync("bench/results", { recursive: true });
writeFileSync("bench/results/engines.md", md);
console.log(md);
