/**
 * A fast seeding path for the benches at 100,000 dataplanes (issue 32): the input tables and
 * the membership index written directly, many BatchWriteItem requests at once, instead of the
 * index rebuild's conditional writes per dataplane (154-374 s at 10,000 dataplanes) or a drain
 * of the seeded stream records. The index items are the ones the allocator writes
 * (functions/store/index-items.ts), computed with its own contribution rules; the stream
 * records the writes produce are never read.
 */
import { contributionsOf } from "../functions/domain/contributions.ts";
import { inPool } from "../functions/domain/records.ts";
import type { PlainRecord } from "../functions/store/attribute-values.ts";
import type { DynamoItemClient } from "../functions/store/dynamo-item-client.ts";
import { encodeRecord, entryKey } from "../functions/store/index-items.ts";
import type { TableNames } from "../functions/store/table-definitions.ts";
import type { DataplaneItem } from "../test/fixtures/builders.ts";

/** BatchWriteItem calls in flight at once (25 items each). */
const WRITE_CONCURRENCY = 16;

export interface SeedResult {
  readonly dataplanes: number;
  readonly indexItems: number;
  readonly seconds: number;
}

/**
 * Writes `meshes` and `dataplanes` and, with `index`, every dataplane's index record and
 * contributor entries (as a rebuild would leave them: no stream position, version 1).
 */
export async function seedTables(
  doc: DynamoItemClient,
  tables: TableNames,
  input: { readonly meshes: readonly string[]; readonly dataplanes: readonly DataplaneItem[] },
  options: { readonly index: boolean; readonly onProgress?: (written: number) => void },
): Promise<SeedResult> {
  const started = performance.now();
  await writeAll(
    doc,
    tables.meshes,
    input.meshes.map((name) => ({ name })),
  );
  await writeAll(doc, tables.dataplanes, input.dataplanes, options.onProgress);
  let indexItems = 0;
  if (options.index) {
    const items: PlainRecord[] = [];
    const nowMs = Date.now();
    for (const item of input.dataplanes) {
      const key = { mesh: item.mesh, name: item.name };
      const { contributions } = contributionsOf(key, item);
      if (contributions.length === 0) continue;
      items.push(encodeRecord(key, contributions, "", 1, nowMs));
      for (const pair of contributions) items.push(entryKey(pair, key));
    }
    await writeAll(doc, tables.index, items, options.onProgress);
    indexItems = items.length;
  }
  return {
    dataplanes: input.dataplanes.length,
    indexItems,
    seconds: (performance.now() - started) / 1000,
  };
}

async function writeAll(
  doc: DynamoItemClient,
  table: string,
  items: readonly object[],
  onProgress?: (written: number) => void,
): Promise<void> {
  const chunks: object[][] = [];
  for (let i = 0; i < items.length; i += 25) chunks.push(items.slice(i, i + 25));
  let written = 0;
  await inPool(chunks, WRITE_CONCURRENCY, async (chunk) => {
    await doc.batchWrite(
      table,
      chunk.map((item) => ({ put: item as PlainRecord })),
    );
    written += chunk.length;
    if (written % 10_000 < 25) onProgress?.(written);
  });
}
