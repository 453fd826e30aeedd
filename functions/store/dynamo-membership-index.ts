import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import {
  type ContributorKey,
  type ContributorKind,
  contributorId,
} from "../domain/contributions.ts";
import { inPool } from "../domain/records.ts";
import { compareServices } from "../domain/service-set.ts";
import type { PlainRecord } from "./attribute-values.ts";
import { ConditionFailed, type DynamoItemClient } from "./dynamo-item-client.ts";
import {
  dataplaneOfSortKey,
  decodeItem,
  decodeRecord,
  encodeRecord,
  entryKey,
  keepsRecord,
  meshPartition,
  pairsOut,
  recordKey,
  recordPartition,
  serviceOfSortKey,
  servicePrefix,
} from "./index-items.ts";
import type {
  IndexEntry,
  IndexedContributor,
  IndexWrite,
  MembershipIndex,
  PendingUpdate,
} from "./ports.ts";

/** Presence queries in flight at once. */
const PRESENCE_CONCURRENCY = 8;
/** Conditional record writes in flight at once. */
const RECORD_CONCURRENCY = 16;

/**
 * The membership index on DynamoDB (store/index-items.ts). Records are read in BatchGetItem
 * calls of up to 100 keys, entries written in BatchWriteItem calls of up to 25 (unprocessed
 * items retried), each dataplane record with a condition on its version. Presence is one
 * strongly consistent `Limit: 1` Query per (mesh, service).
 */
export class DynamoMembershipIndex implements MembershipIndex {
  constructor(
    private readonly doc: DynamoItemClient,
    private readonly table: string,
  ) {}

  async getContributors(
    keys: readonly ContributorKey[],
    consistent = true,
  ): Promise<Map<string, IndexedContributor>> {
    const unique = new Map(keys.map((key) => [contributorId(key), key]));
    const items = await this.doc.batchGet(this.table, [...unique.values()].map(recordKey), {
      consistent,
    });
    const records = new Map<string, IndexedContributor>();
    for (const item of items) {
      const record = decodeRecord(item);
      records.set(contributorId(record.key), record);
    }
    return records;
  }

  async write(writes: readonly IndexWrite[]): Promise<Set<string>> {
    // One request per key in a batch (DynamoDB refuses duplicates); removals first, so an
    // entry both removed and added (by two writes of one call) ends up present.
    const entries = new Map<string, { put: PlainRecord } | { delete: PlainRecord }>();
    for (const write of writes) {
      for (const pair of write.remove) {
        const key = entryKey(pair, write.key);
        entries.set(JSON.stringify([key.pk, key.sk]), { delete: key });
      }
    }
    for (const write of writes) {
      for (const pair of write.add) {
        const key = entryKey(pair, write.key);
        entries.set(JSON.stringify([key.pk, key.sk]), { put: key });
      }
    }
    if (entries.size > 0) await this.doc.batchWrite(this.table, [...entries.values()]);

    const lost = new Set<string>();
    const withRecord = writes.filter((write) => write.record !== undefined);
    await inPool(withRecord, RECORD_CONCURRENCY, async (write) => {
      const record = write.record as NonNullable<IndexWrite["record"]>;
      if (!(await this.writeRecord(write.key, record))) lost.add(contributorId(write.key));
    });
    return lost;
  }

  private async writeRecord(
    key: ContributorKey,
    record: NonNullable<IndexWrite["record"]>,
  ): Promise<boolean> {
    const expected = record.expectedVersion;
    try {
      if (!keepsRecord(record.contributions, record.sequence)) {
        if (expected === undefined) return true;
        await this.doc.delete({
          TableName: this.table,
          Key: recordKey(key),
          ConditionExpression: "#v = :v",
          ExpressionAttributeNames: { "#v": "v" },
          ExpressionAttributeValues: { ":v": expected },
        });
        return true;
      }
      await this.doc.put({
        TableName: this.table,
        Item: encodeRecord(
          key,
          record.contributions,
          record.sequence,
          (expected ?? 0) + 1,
          Date.now(),
          record.pending,
        ),
        ...(expected === undefined
          ? { ConditionExpression: "attribute_not_exists(pk)" }
          : {
              ConditionExpression: "#v = :v",
              ExpressionAttributeNames: { "#v": "v" },
              ExpressionAttributeValues: { ":v": expected },
            }),
      });
      return true;
    } catch (error) {
      if (error instanceof ConditionFailed) return false;
      throw error;
    }
  }

  async present(mesh: string, services: readonly string[]): Promise<Set<string>> {
    return new Set((await this.firstContributors(mesh, services)).keys());
  }

  async firstContributors(
    mesh: string,
    services: readonly string[],
  ): Promise<Map<string, ContributorKey>> {
    const found = new Map<string, ContributorKey>();
    await inPool([...new Set(services)], PRESENCE_CONCURRENCY, async (service) => {
      const page = await this.doc.queryPage({
        TableName: this.table,
        KeyConditionExpression: "pk = :p AND begins_with(sk, :s)",
        ExpressionAttributeValues: { ":p": meshPartition(mesh), ":s": servicePrefix(service) },
        ConsistentRead: true,
        Limit: 1,
        ProjectionExpression: "sk",
      });
      const first = page.items[0];
      if (first !== undefined) found.set(service, dataplaneOfSortKey(String(first.sk)));
    });
    return found;
  }

  async setPending(updates: readonly PendingUpdate[]): Promise<void> {
    await inPool(updates, RECORD_CONCURRENCY, async (update) => {
      try {
        await this.doc.update({
          TableName: this.table,
          Key: recordKey(update.key),
          UpdateExpression: update.pending.length > 0 ? "SET #p = :p" : "REMOVE #p",
          ConditionExpression: "#v = :v",
          ExpressionAttributeNames: { "#p": "p", "#v": "v" },
          ExpressionAttributeValues: {
            ":v": update.version,
            ...(update.pending.length > 0 ? { ":p": pairsOut(update.pending) } : {}),
          },
        });
      } catch (error) {
        if (!(error instanceof ConditionFailed)) throw error;
      }
    });
  }

  async servicesOf(mesh: string): Promise<string[]> {
    const services = new Set<string>();
    for await (const item of this.meshItems(mesh, "sk")) {
      services.add(serviceOfSortKey(String(item.sk)));
    }
    return [...services].sort(compareServices);
  }

  async entriesOf(mesh: string, consistent = true): Promise<IndexEntry[]> {
    const entries: IndexEntry[] = [];
    for await (const item of this.meshItems(mesh, undefined, consistent)) {
      const decoded = decodeItem(item);
      if (decoded !== undefined && "entry" in decoded) entries.push(decoded.entry);
    }
    return entries;
  }

  async recordsOf(
    mesh: string,
    consistent = true,
    kind?: ContributorKind,
  ): Promise<IndexedContributor[]> {
    const records: IndexedContributor[] = [];
    for await (const item of this.partition(recordPartition(mesh, kind), undefined, consistent)) {
      records.push(decodeRecord(item));
    }
    return records;
  }

  /** Every contributor entry of a mesh, a Query page at a time. */
  private meshItems(mesh: string, projection?: string, consistent = true) {
    return this.partition(meshPartition(mesh), projection, consistent);
  }

  private async *partition(pk: string, projection?: string, consistent = true) {
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.doc.queryPage({
        TableName: this.table,
        KeyConditionExpression: "pk = :p",
        ExpressionAttributeValues: { ":p": pk },
        ConsistentRead: consistent,
        ...(projection !== undefined ? { ProjectionExpression: projection } : {}),
        ...(start !== undefined ? { start } : {}),
      });
      yield* page.items;
      start = page.next;
    } while (start !== undefined);
  }

  async *scan(): AsyncIterable<{ entries: IndexEntry[]; dataplanes: IndexedContributor[] }> {
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.doc.scanPage(this.table, start);
      const entries: IndexEntry[] = [];
      const dataplanes: IndexedContributor[] = [];
      for (const item of page.items) {
        const decoded = decodeItem(item);
        if (decoded === undefined) continue;
        if ("entry" in decoded) entries.push(decoded.entry);
        else dataplanes.push(decoded.record);
      }
      yield { entries, dataplanes };
      start = page.next;
    } while (start !== undefined);
  }
}
