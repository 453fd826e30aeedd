import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "..", "..");
/** The longest a source file may be (issue 15): beyond it, split the file by concern. */
const MAX_LINES = 400;

/** The .ts files under `dir` (relative to the repository), its subfolders included. */
function sourcesOf(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) files.push(...sourcesOf(path));
    else if (entry.name.endsWith(".ts")) files.push(path);
  }
  return files;
}

/** Every import and re-export of the files under `dir`, type-only ones included. */
function importsOf(dir: string): Array<{ file: string; specifier: string }> {
  const found: Array<{ file: string; specifier: string }> = [];
  for (const file of sourcesOf(dir)) {
    const text = readFileSync(join(root, file), "utf8");
    for (const match of text.matchAll(/(?:import|export)[^'"]*?from\s+["']([^"']+)["']/g)) {
      found.push({ file, specifier: match[1] as string });
    }
  }
  return found;
}

/** The import cycles among the files under `dirs`, each as the files along it. */
function cyclesIn(...dirs: string[]): string[][] {
  const edges = new Map<string, string[]>();
  for (const { file, specifier } of dirs.flatMap(importsOf)) {
    if (!specifier.startsWith(".")) continue;
    const target = normalize(join(dirname(file), specifier)).replaceAll("\\", "/");
    edges.set(file, [...(edges.get(file) ?? []), target]);
  }
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    path.push(file);
    for (const next of edges.get(file) ?? []) {
      if (state.get(next) === "open") cycles.push([...path.slice(path.indexOf(next)), next]);
      else if (state.get(next) === undefined) visit(next);
    }
    path.pop();
    state.set(file, "done");
  };
  for (const file of [...edges.keys()].sort()) if (state.get(file) === undefined) visit(file);
  return cycles;
}

describe("architecture", () => {
  it("keeps the domain free of the AWS SDK, Lambda types and Node I/O", () => {
    const imports = importsOf("functions/domain");

    const forbidden = imports.filter(
      ({ specifier }) =>
        specifier.startsWith("@aws-sdk/") ||
        specifier.startsWith("@aws-lambda-powertools/") ||
        specifier === "aws-lambda" ||
        specifier.startsWith("node:") ||
        ["fs", "net", "http", "https", "child_process", "path", "os"].includes(specifier) ||
        specifier.includes("/store/") ||
        specifier.includes("/allocator/"),
    );

    expect(imports.length).toBeGreaterThan(0);
    expect(forbidden).toEqual([]);
  });

  it("keeps the store adapters free of Lambda handler code", () => {
    const imports = importsOf("functions/store");

    const forbidden = imports.filter(
      ({ specifier }) =>
        specifier.includes("/allocator/") || specifier.startsWith("@aws-lambda-powertools/"),
    );

    expect(forbidden).toEqual([]);
  });

  it("has no import cycle in functions/ and tools/ (type-only imports count)", () => {
    expect(sourcesOf("functions").length).toBeGreaterThan(50);
    expect(sourcesOf("tools").length).toBeGreaterThan(10);
    expect(cyclesIn("functions", "tools")).toEqual([]);
  });

  it("keeps the shipped code (functions/, infra/) free of the tools (the CLI and the local runtime)", () => {
    const imports = [...importsOf("functions"), ...importsOf("infra")];

    const intoTools = imports.filter(({ file, specifier }) =>
      normalize(join(dirname(file), specifier))
        .replaceAll("\\", "/")
        .startsWith("tools/"),
    );

    expect(imports.length).toBeGreaterThan(100);
    expect(intoTools).toEqual([]);
  });

  it("keeps every source file under functions/, tools/, infra/ and bench/ at 400 lines or fewer", () => {
    const lines = (file: string): number =>
      readFileSync(join(root, file), "utf8").replace(/\n$/, "").split("\n").length;
    const files = ["functions", "tools", "infra", "bench"].flatMap(sourcesOf);

    const over = files.filter((file) => lines(file) > MAX_LINES).map((f) => `${f}: ${lines(f)}`);

    expect(files.length).toBeGreaterThan(100);
    expect(over).toEqual([]);
  });
});
