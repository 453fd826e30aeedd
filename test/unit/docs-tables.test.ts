/**
 * The docs' tables against the code they describe: a table that drifts fails here.
 *
 * - docs/repair.md's repair kinds against the `RepairKind` type (read from the source, wherever
 *   in functions/ it is declared);
 * - docs/contract.md's CLI command table against the CLI's command list, and docs/local.md's
 *   against the CLI's own help (each command's usage line and summary);
 * - the configuration table (docs/contract.md) against the settings, the table definitions,
 *   the variables the shipped code reads and the ones the construct sets on the function;
 * - docs/decisions/README.md against the decision records and their `Status:` lines.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { SETTINGS } from "../../functions/allocator/config.ts";
import { METRICS_NAMESPACE, SERVICE_NAME } from "../../functions/allocator/telemetry-names.ts";
import { ALL_TABLES, OPTIONAL_TABLES } from "../../functions/store/table-definitions.ts";
import { commandTableMarkdown } from "../../tools/cli/command-spec.ts";
import { COMMANDS } from "../../tools/cli/command-table.ts";
import { HELP } from "../../tools/cli/main.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string): string => readFileSync(join(ROOT, path), "utf8");

/**
 * The rows of the first Markdown table in `markdown` whose header's first cell is `header`
 * (cells trimmed; the header and the separator left out).
 */
function tableRows(markdown: string, header: string): string[][] {
  const lines = markdown.split("\n");
  const cells = (line: string): string[] =>
    line
      .trim()
      .replace(/^\||\|$/g, "")
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim().replaceAll("\\|", "|"));
  const start = lines.findIndex((line) => line.startsWith("|") && cells(line)[0] === header);
  if (start < 0) throw new Error(`no table with a "${header}" column`);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break;
    rows.push(cells(line));
  }
  return rows;
}

/** The text of every `code span` in a cell, in order. */
const codeSpans = (cell: string): string[] =>
  [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1] as string);

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));
}

/** The string literals of a union type alias declared somewhere under `dir`. */
function unionMembers(dir: string, typeName: string): string[] {
  const found: string[][] = [];
  for (const file of sourceFiles(dir)) {
    const text = read(file);
    if (!text.includes(`type ${typeName}`)) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true);
    source.forEachChild((node) => {
      if (!ts.isTypeAliasDeclaration(node) || node.name.text !== typeName) return;
      const members = ts.isUnionTypeNode(node.type) ? node.type.types : [node.type];
      found.push(
        members.map((member) => {
          if (!ts.isLiteralTypeNode(member) || !ts.isStringLiteral(member.literal)) {
            throw new Error(`${file}: ${typeName} has a member that is not a string literal`);
          }
          return member.literal.text;
        }),
      );
    });
  }
  if (found.length !== 1) {
    throw new Error(`expected one declaration of ${typeName} under ${dir}, found ${found.length}`);
  }
  return found[0] as string[];
}

const sorted = (values: Iterable<string>): string[] => [...values].sort();

describe("docs/repair.md", () => {
  it("names every repair kind of the RepairKind type, and no other", () => {
    const documented = tableRows(read("docs/repair.md"), "kind").map(
      (row) => codeSpans(row[0] ?? "")[0] ?? row[0] ?? "",
    );
    expect(sorted(documented)).toEqual(sorted(unionMembers("functions", "RepairKind")));
    expect(new Set(documented).size).toBe(documented.length);
  });
});

describe("docs/contract.md, the CLI", () => {
  it("lists every command of the CLI, and no other", () => {
    const names = COMMANDS.map((spec) => spec.words.join(" "));
    // A row's command is the longest command name its first cell's code spans start with
    // (`reconcile MESH ...`, `reconcile --all` are both `reconcile`).
    const documented = new Set<string>();
    for (const [cell] of tableRows(read("docs/contract.md"), "command")) {
      for (const span of codeSpans(cell ?? "")) {
        const name = names
          .filter((candidate) => span === candidate || span.startsWith(`${candidate} `))
          .sort((a, b) => b.length - a.length)[0];
        if (name === undefined) throw new Error(`docs/contract.md: unknown command \`${span}\``);
        documented.add(name);
      }
    }
    expect(sorted(documented)).toEqual(sorted(names));
  });
});

describe("docs/local.md, the CLI", () => {
  it("shows the CLI's own help as its command table: every usage line and summary, in order", () => {
    const expected = commandTableMarkdown(COMMANDS);
    const text = read("docs/local.md");
    const start = text.indexOf("| command ");
    const end = text.indexOf("\n\n", start);
    // On a difference, the expected table is printed: paste it into docs/local.md.
    expect(text.slice(start, end)).toBe(expected);
  });

  it("is the table --help prints: each row's usage and summary are in the help", () => {
    for (const [usage, summary] of tableRows(read("docs/local.md"), "command")) {
      const line = codeSpans(usage ?? "")[0] ?? "";
      expect(HELP).toContain(`  ${line}\n      ${summary}`);
    }
  });
});

describe("the configuration table (docs/contract.md)", () => {
  // Every variable the function reads or the construct sets on it, with its default ("unset"
  // when it has none).
  const expected = new Map<string, string>([
    ...ALL_TABLES.map((def) => [def.envVar, def.defaultName] as const),
    // An optional table has no default for the function: unset, the deployment has none.
    ...OPTIONAL_TABLES.map((def) => [def.envVar, "unset"] as const),
    ...Object.values(SETTINGS).map(
      (setting) => [setting.envVar, "default" in setting ? setting.default : "unset"] as const,
    ),
    // Read by Powertools (and the telemetry's fallbacks), set per allocator by the construct.
    ["POWERTOOLS_SERVICE_NAME", SERVICE_NAME],
    ["POWERTOOLS_METRICS_NAMESPACE", METRICS_NAMESPACE],
    ["POWERTOOLS_LOG_LEVEL", "INFO"],
    // Read by Node.js itself; the construct sets it for source-mapped stack traces.
    ["NODE_OPTIONS", "unset"],
  ]);

  it("lists every setting with its default, and no other", () => {
    const documented = new Map<string, string>();
    for (const [, envVar, fallback] of tableRows(read("docs/contract.md"), "setting")) {
      const name = codeSpans(envVar ?? "")[0];
      if (name === undefined) throw new Error("docs/contract.md: a setting row names no env var");
      documented.set(
        name,
        codeSpans(fallback ?? "")[0] ?? (fallback ?? "").split(/[:= ]/)[0] ?? "",
      );
    }
    expect(Object.fromEntries(documented)).toEqual(Object.fromEntries(expected));
  });

  it("covers every variable the shipped code reads and every one the construct sets on the function", () => {
    const used = new Set<string>();
    for (const file of sourceFiles("functions")) {
      for (const match of read(file).matchAll(/process\.env(?:\.|\[["'])([A-Z][A-Z0-9_]*)/g)) {
        used.add(match[1] as string);
      }
    }
    // The function's `environment: { ... }` in the construct: its upper-case keys.
    const construct = read("infra/vip-allocator.ts");
    const block = construct.slice(construct.indexOf("environment: {"));
    const environment = block.slice(0, block.indexOf("\n      },"));
    for (const match of environment.matchAll(/^\s+([A-Z][A-Z0-9_]*):/gm))
      used.add(match[1] as string);

    const unlisted = sorted(used).filter((name) => !expected.has(name));

    expect(used.size).toBeGreaterThan(3);
    expect(unlisted).toEqual([]);
  });
});

describe("docs/decisions/README.md", () => {
  const dir = "docs/decisions";
  const records = readdirSync(join(ROOT, dir))
    .filter((name) => /^\d{3}-.*\.md$/.test(name))
    .sort();

  /**
   * A record's status as the index gives it: its `Status:` paragraph with links reduced to
   * their numbers, explanations (parentheses other than "refines", "narrows", "supersedes", and
   * whatever follows a colon or a full stop) left out.
   */
  function statusOf(record: string): string {
    const lines = read(join(dir, record)).split("\n");
    const at = lines.findIndex((line) => line.startsWith("Status: "));
    if (at < 0) throw new Error(`${record} has no Status: line`);
    const end = lines.findIndex((line, index) => index > at && line.trim() === "");
    const paragraph = lines
      .slice(at, end < 0 ? undefined : end)
      .map((line) => line.trim())
      .join(" ")
      .slice("Status: ".length);
    return (
      paragraph
        .replace(/\[(\d{3})\]\([^)]*\)/g, "$1")
        .replace(/\s*\(([^()]*)\)/g, (whole, inner: string) =>
          /^(refines|narrows|supersedes)\b/.test(inner) ? whole : "",
        )
        .split(/:|\.\s|\.$/)[0] ?? ""
    ).trim();
  }

  it("indexes every record, with the status its Status: line gives", () => {
    const index = tableRows(read(join(dir, "README.md")), "record").map(([record, status]) => ({
      file: /\]\(([^)]+)\)/.exec(record ?? "")?.[1],
      status,
    }));
    expect(index.map((row) => row.file)).toEqual(records);
    for (const row of index) {
      expect(row.status, row.file).toBe(statusOf(row.file as string));
      expect(row.status, row.file).toMatch(/^(accepted|superseded)\b/);
    }
  });

  it("each record's title starts with the number of its file name", () => {
    for (const record of records) {
      const title = read(join(dir, record)).split("\n")[0] ?? "";
      expect(title, record).toMatch(new RegExp(`^# ${record.slice(0, 3)}: `));
    }
  });
});
