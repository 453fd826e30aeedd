import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import {
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  TrimmedDataAccessException,
} from "@aws-sdk/client-dynamodb-streams";
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import type { AttributeValue } from "aws-lambda";
import type { AllocatorConfig } from "../../../functions/allocator/config.ts";
import {
  type ContributorKey,
  contributionsOf,
  contributorId,
} from "../../../functions/domain/contributions.ts";
import { DynamoMembershipIndex } from "../../../functions/store/dynamo-membership-index.ts";
import { DynamoMeshSource } from "../../../functions/store/dynamo-mesh-source.ts";
import { compareSequenceNumbers } from "../../../functions/store/stream-records.ts";
import { parseStreamArn } from "../../../functions/store/table-definitions.ts";
import { clientConfig } from "../../local/aws-clients.ts";
import type { CliContext } from "../context.ts";
import { CommandFailedError, type ExitCode } from "../errors.ts";
import { runSweep } from "./reconcile.ts";

/** One entry of the failure destination: a batch of one shard's records that gave up. */
export interface FailureEntry {
  /** Line number in the file, or the SQS message id. */
  readonly id: string;
  readonly timestamp: string | undefined;
  readonly condition: string | undefined;
  readonly table: "meshes" | "dataplanes" | "external-services" | undefined;
  readonly streamArn: string;
  readonly shardId: string;
  readonly startSequenceNumber: string;
  readonly endSequenceNumber: string;
  readonly batchSize: number;
  /** The records' keys: in the local file; read back from the stream for a queue's entries. */
  keys: Array<Record<string, AttributeValue>> | undefined;
  /** Why the keys are unknown (records trimmed from the stream). */
  keysUnknown?: string;
  readonly lastError: string | undefined;
  /** SQS only. */
  readonly receiptHandle?: string;
  /** The meshes its records affect (filled by {@link affectedMeshes}). */
  meshes: string[];
}

interface LambdaFailureRecord {
  readonly timestamp?: string;
  readonly requestContext?: { readonly condition?: string };
  readonly DDBStreamBatchInfo?: {
    readonly shardId?: string;
    readonly startSequenceNumber?: string;
    readonly endSequenceNumber?: string;
    readonly batchSize?: number;
    readonly streamArn?: string;
  };
  readonly records?: ReadonlyArray<{ readonly keys?: Record<string, AttributeValue> }>;
  readonly lastError?: string;
}

/** The input tables whose streams can have failure entries. */
type InputTableNames = {
  readonly meshes: string;
  readonly dataplanes: string;
  readonly externalServices?: string | undefined;
};

function entryOf(id: string, body: LambdaFailureRecord, tables: InputTableNames): FailureEntry {
  const info = body.DDBStreamBatchInfo ?? {};
  const tableName = parseStreamArn(info.streamArn)?.tableName;
  return {
    id,
    timestamp: body.timestamp,
    condition: body.requestContext?.condition,
    table:
      tableName === tables.meshes
        ? "meshes"
        : tableName === tables.dataplanes
          ? "dataplanes"
          : tableName !== undefined && tableName === tables.externalServices
            ? "external-services"
            : undefined,
    streamArn: info.streamArn ?? "",
    shardId: info.shardId ?? "",
    startSequenceNumber: info.startSequenceNumber ?? "",
    endSequenceNumber: info.endSequenceNumber ?? "",
    batchSize: info.batchSize ?? 0,
    keys: body.records?.flatMap((record) => (record.keys === undefined ? [] : [record.keys])),
    lastError: body.lastError,
    meshes: [],
  };
}

/** The local failure file's entries (each line one entry; unreadable lines are reported). */
export function readFailureFile(
  file: string,
  tables: InputTableNames,
  onBadLine: (line: number, reason: string) => void,
): FailureEntry[] {
  if (!existsSync(file)) return [];
  const entries: FailureEntry[] = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((text, index) => {
      if (text.trim() === "") return;
      try {
        entries.push(entryOf(String(index + 1), JSON.parse(text) as LambdaFailureRecord, tables));
      } catch (error) {
        onBadLine(index + 1, error instanceof Error ? error.message : String(error));
      }
    });
  return entries;
}

/**
 * Removes the given lines from the failure file, keeping anything appended meanwhile (the file
 * is re-read just before it is replaced, and replaced by a rename).
 */
function removeLines(file: string, lines: ReadonlySet<string>): void {
  const kept = readFileSync(file, "utf8")
    .split("\n")
    .filter((text, index) => text.trim() !== "" && !lines.has(String(index + 1)));
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, kept.length === 0 ? "" : `${kept.join("\n")}\n`);
  renameSync(temporary, file);
}

/** Reads a queue's entries (Lambda's on-failure records), hiding them for `visibilitySeconds`. */
async function readQueue(
  sqs: SQSClient,
  queueUrl: string,
  tables: InputTableNames,
  visibilitySeconds: number,
): Promise<FailureEntry[]> {
  const entries = new Map<string, FailureEntry>();
  for (let round = 0; round < 100; round++) {
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: visibilitySeconds,
        WaitTimeSeconds: 0,
      }),
    );
    const messages = received.Messages ?? [];
    const fresh = messages.filter((message) => !entries.has(message.MessageId ?? ""));
    if (fresh.length === 0) break;
    for (const message of fresh) {
      let body: LambdaFailureRecord = {};
      try {
        body = JSON.parse(message.Body ?? "{}") as LambdaFailureRecord;
      } catch {
        // Not an on-failure record: listed with what is known (nothing).
      }
      const entry = entryOf(message.MessageId ?? "", body, tables);
      entries.set(entry.id, { ...entry, receiptHandle: message.ReceiptHandle ?? "" });
    }
  }
  return [...entries.values()];
}

/** A queue entry holds only the shard and sequence range: its keys are read from the stream. */
async function keysFromStream(streams: DynamoDBStreamsClient, entry: FailureEntry): Promise<void> {
  const keys: Array<Record<string, AttributeValue>> = [];
  try {
    let iterator = (
      await streams.send(
        new GetShardIteratorCommand({
          StreamArn: entry.streamArn,
          ShardId: entry.shardId,
          ShardIteratorType: "AT_SEQUENCE_NUMBER",
          SequenceNumber: entry.startSequenceNumber,
        }),
      )
    ).ShardIterator;
    for (let round = 0; iterator !== undefined && round < 1000; round++) {
      const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
      const records = page.Records ?? [];
      for (const record of records) {
        const sequence = record.dynamodb?.SequenceNumber ?? "";
        if (compareSequenceNumbers(sequence, entry.endSequenceNumber) > 0) {
          entry.keys = keys;
          return;
        }
        if (record.dynamodb?.Keys !== undefined) {
          keys.push(record.dynamodb.Keys as Record<string, AttributeValue>);
        }
      }
      if (records.length === 0 && keys.length > 0) break;
      iterator = page.NextShardIterator;
    }
    entry.keys = keys;
  } catch (error) {
    if (!(error instanceof TrimmedDataAccessException) && !isGone(error)) throw error;
    entry.keysUnknown = "its records are no longer in the stream (24 h retention)";
  }
}

function isGone(error: unknown): boolean {
  return error instanceof Error && error.name === "ResourceNotFoundException";
}

/**
 * The meshes an entry's records affect: a mesh record's own mesh; an external service's mesh;
 * a dataplane's mesh, and the meshes it contributes to now (its item) or did (its index
 * record: an ingress advertises for other meshes).
 */
async function affectedMeshes(ctx: CliContext, entries: readonly FailureEntry[]): Promise<void> {
  const source = new DynamoMeshSource(ctx.ddb, ctx.tables);
  const index = new DynamoMembershipIndex(ctx.doc, ctx.tables.index);
  const dataplanes = new Map<string, ContributorKey>();
  for (const entry of entries) {
    if (entry.table !== "dataplanes") continue;
    for (const key of entry.keys ?? []) {
      if (key.mesh?.S !== undefined && key.name?.S !== undefined) {
        const dataplane = { mesh: key.mesh.S, name: key.name.S };
        dataplanes.set(contributorId(dataplane), dataplane);
      }
    }
  }
  const keys = [...dataplanes.values()];
  const [items, records] =
    keys.length === 0
      ? [{ records: [] }, new Map()]
      : await Promise.all([source.dataplanes(keys), index.getContributors(keys)]);
  const meshesOf = new Map<string, Set<string>>();
  for (const key of keys) meshesOf.set(contributorId(key), new Set([key.mesh]));
  for (const record of items.records) {
    for (const pair of contributionsOf(record, record.item).contributions) {
      meshesOf.get(contributorId(record))?.add(pair.mesh);
    }
  }
  for (const [id, record] of records) {
    for (const pair of record.contributions) meshesOf.get(id)?.add(pair.mesh);
  }
  for (const entry of entries) {
    const meshes = new Set<string>();
    for (const key of entry.keys ?? []) {
      if (entry.table === "meshes" && key.name?.S !== undefined) meshes.add(key.name.S);
      // An external service touches only the mesh it is stored under.
      if (entry.table === "external-services" && key.mesh?.S !== undefined) meshes.add(key.mesh.S);
      if (entry.table === "dataplanes" && key.mesh?.S !== undefined && key.name?.S !== undefined) {
        for (const mesh of meshesOf.get(contributorId({ mesh: key.mesh.S, name: key.name.S })) ??
          []) {
          meshes.add(mesh);
        }
      }
    }
    entry.meshes = [...meshes].sort();
  }
}

export interface FailuresRequest {
  readonly queueUrl: string | undefined;
  readonly redrive: boolean;
}

/**
 * `failures [--queue-url URL] [--redrive]`: lists the failure destination's entries (the local
 * file, or Lambda's SQS queue) with the meshes their records affect; `--redrive` reconciles
 * exactly those meshes and then removes the entries it repaired. An entry whose records are no
 * longer in the stream is kept and named: `reconcile --all` covers it.
 */
export async function failuresCommand(
  ctx: CliContext,
  config: AllocatorConfig,
  request: FailuresRequest,
): Promise<ExitCode> {
  const where = request.queueUrl ?? ctx.failureFile;
  let entries: FailureEntry[];
  let sqs: SQSClient | undefined;
  if (request.queueUrl === undefined) {
    entries = readFailureFile(ctx.failureFile, ctx.tables, (line, reason) =>
      ctx.out.note(`warning: ${ctx.failureFile}:${line} is not a failure record (${reason})`),
    );
  } else {
    sqs = new SQSClient(clientConfig({ endpoint: ctx.endpoint }, ctx.env));
    entries = await readQueue(sqs, request.queueUrl, ctx.tables, request.redrive ? 300 : 0);
    const streams = new DynamoDBStreamsClient(clientConfig({ endpoint: ctx.endpoint }, ctx.env));
    try {
      for (const entry of entries)
        if (entry.keys === undefined) await keysFromStream(streams, entry);
    } finally {
      streams.destroy();
    }
  }
  try {
    await affectedMeshes(ctx, entries);
    const meshes = [...new Set(entries.flatMap((entry) => entry.meshes))].sort();
    let redriven: string[] = [];
    if (request.redrive && meshes.length > 0) {
      const result = await runSweep(ctx, config, { meshes, dryRun: false });
      if (!result.finished) throw new CommandFailedError("the sweep stopped before the end");
      const repaired = entries.filter((entry) => entry.keysUnknown === undefined);
      redriven = repaired.map((entry) => entry.id);
      if (sqs !== undefined && request.queueUrl !== undefined) {
        for (const entry of repaired) {
          await sqs.send(
            new DeleteMessageCommand({
              QueueUrl: request.queueUrl,
              ReceiptHandle: entry.receiptHandle ?? "",
            }),
          );
        }
        for (const entry of entries.filter((e) => e.keysUnknown !== undefined)) {
          await sqs.send(
            new ChangeMessageVisibilityCommand({
              QueueUrl: request.queueUrl,
              ReceiptHandle: entry.receiptHandle ?? "",
              VisibilityTimeout: 0,
            }),
          );
        }
      } else if (redriven.length > 0) {
        removeLines(ctx.failureFile, new Set(redriven));
      }
      if (!ctx.json) {
        ctx.out.line(
          `redrive: reconciled ${meshes.length} meshes (${result.repairs.length} corrections), removed ${redriven.length} of ${entries.length} entries`,
        );
      }
    }
    if (ctx.json) {
      ctx.out.line(
        JSON.stringify({
          source: where,
          entries: entries.map(({ receiptHandle: _r, ...entry }) => entry),
          meshes,
          ...(request.redrive ? { redriven } : {}),
        }),
      );
      return 0;
    }
    if (entries.length === 0) {
      ctx.out.line(`no failure entries in ${where}`);
      return 0;
    }
    if (!request.redrive) {
      ctx.out.line(`${entries.length} failure entries in ${where}:`);
      for (const entry of entries) {
        const affects = entry.keysUnknown ?? `meshes: ${entry.meshes.join(", ") || "(none)"}`;
        ctx.out.line(
          `  ${entry.id}  ${entry.timestamp ?? "?"}  ${entry.table ?? "unknown table"}  ${entry.keys?.length ?? entry.batchSize} records  ${affects}${entry.condition !== undefined ? `  (${entry.condition})` : ""}`,
        );
      }
      ctx.out.line(
        `redrive them with: failures --redrive${request.queueUrl !== undefined ? ` --queue-url ${request.queueUrl}` : ""}`,
      );
    }
    return 0;
  } finally {
    sqs?.destroy();
  }
}
