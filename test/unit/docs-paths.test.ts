/**
 * Every file the docs cite exists: relative Markdown links, and code spans that name a file of
 * this repository (`functions/allocator/handler.ts`, or a shorter tail of one such as
 * `pass/reconcile-mesh.ts`). A moved or deleted file fails here until the docs follow it.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
/** Not sources: installed, generated or local-only trees, never cited as files of the repo. */
const SKIPPED_DIRS = new Set([".git", "node_modules", "dist", ".local", "cdk.out", "__pycache__"]);
/** Paths in code spans that name files outside this repository (a consumer's app, the package). */
const OUTSIDE = /^(dist|node_modules|bin|lib|cdk\.out|\.local|~|\/)/;
const FILE_SPAN =
  /^[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)+\.(?:ts|mjs|js|cjs|py|java|md|json|ya?ml|svg|csv|sh)$/;

function filesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    if (SKIPPED_DIRS.has(entry.name)) continue;
    const path = dir === "." ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) found.push(...filesUnder(path));
    else found.push(path);
  }
  return found;
}

const repoFiles = filesUnder(".");
const docs = repoFiles.filter(
  (file) =>
    file.endsWith(".md") && (file === "README.md" || /^(docs|examples|schema)\//.test(file)),
);

/** Where `cited` in `doc` points, or undefined when it names no file of the repository. */
function resolveCited(doc: string, cited: string): string | undefined {
  for (const candidate of [cited, join(dirname(doc), cited)]) {
    if (existsSync(join(ROOT, candidate))) return relative(ROOT, join(ROOT, candidate));
  }
  return repoFiles.find((file) => file.endsWith(`/${cited}`));
}

describe("the docs' citations", () => {
  it("finds the documents to check", () => {
    expect(docs).toContain("README.md");
    expect(docs.filter((file) => file.startsWith("docs/decisions/")).length).toBeGreaterThan(50);
  });

  it("links only to files that exist (relative Markdown links)", () => {
    const broken: string[] = [];
    for (const doc of docs) {
      for (const match of readFileSync(join(ROOT, doc), "utf8").matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = (match[1] as string).split("#")[0] as string;
        if (target === "" || /^[a-z]+:/.test(target)) continue;
        if (!existsSync(join(ROOT, dirname(doc), target))) broken.push(`${doc}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it("cites in code spans only files that exist", () => {
    const missing: string[] = [];
    let checked = 0;
    for (const doc of docs) {
      for (const match of readFileSync(join(ROOT, doc), "utf8").matchAll(/`([^`\n]+)`/g)) {
        const span = match[1] as string;
        if (!FILE_SPAN.test(span) || OUTSIDE.test(span)) continue;
        checked += 1;
        if (resolveCited(doc, span) === undefined) missing.push(`${doc}: ${span}`);
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(missing).toEqual([]);
  });
});
