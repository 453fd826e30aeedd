/**
 * How commands print resources: `-o table` (aligned columns, kubectl's), `-o json` (one JSON
 * document on one line) or `-o yaml`; a list is `{ total, items }` in JSON and YAML, as
 * kumactl prints it.
 */
import { stringify } from "yaml";
import type { CliContext, OutputFormat } from "./context.ts";
import { UsageError } from "./errors.ts";

export const OUTPUT_FORMATS: readonly OutputFormat[] = ["table", "json", "yaml"];

/** `-o`'s value (default: table, or json with `--json`). */
export function parseOutput(value: string | undefined, json: boolean): OutputFormat {
  if (value === undefined) return json ? "json" : "table";
  if (!(OUTPUT_FORMATS as readonly string[]).includes(value)) {
    throw new UsageError(
      `-o ${JSON.stringify(value)}: expected ${OUTPUT_FORMATS.join(", ")} (e.g. -o yaml)`,
    );
  }
  return value as OutputFormat;
}

/** Aligned columns, the first row the header; cells never empty (`-`). */
export function formatTable(rows: readonly (readonly string[])[]): string[] {
  const widths = (rows[0] ?? []).map((_, column) =>
    Math.max(...rows.map((row) => (row[column] || "-").length)),
  );
  return rows.map((row) =>
    row
      .map((cell, column) => (cell || "-").padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd(),
  );
}

/** A document as JSON or YAML. */
export function formatDocument(value: unknown, format: "json" | "yaml"): string {
  return format === "json" ? JSON.stringify(value) : stringify(value).trimEnd();
}

/**
 * Prints one resource or a list: `document` for JSON and YAML, `rows` (header first) for the
 * table; a list with no rows prints `empty` instead of a bare header.
 */
export function printResources(
  ctx: CliContext,
  document: unknown,
  rows: () => readonly (readonly string[])[],
  empty?: string,
): void {
  if (ctx.output !== "table") {
    ctx.out.line(formatDocument(document, ctx.output));
    return;
  }
  const table = rows();
  if (table.length <= 1 && empty !== undefined) {
    ctx.out.line(empty);
    return;
  }
  for (const line of formatTable(table)) ctx.out.line(line);
}

/** A list as kumactl prints one in JSON and YAML. */
export const listOf = <T>(items: readonly T[]) => ({ total: items.length, items });
