/**
 * Stream records through the real batch step on a World's in-memory ports: each helper makes
 * the change in the tables and returns its stream record, as the control plane and DynamoDB
 * Streams would. Shared by the event-path and pass-skip tests.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { type BatchSettings, processBatch } from "../../functions/allocator/batch/process-batch.ts";
import type { MeshSource } from "../../functions/store/ports.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import {
  type DataplaneItem,
  dataplane,
  dataplaneRecord,
  meshItem,
  meshRecord,
} from "../fixtures/builders.ts";
import { World, type WorldOptions } from "./reconcile-world.ts";

export const TABLES = resolveTableNames({});

export function indexWorld(options: WorldOptions = {}): World {
  return new World({ mode: "index", ...options });
}

/**
 * Runs records through the real batch step, on the world's ports (or a source standing in),
 * with the invocation's budget and handover if given (decision 160); the outcome of each pass
 * it runs goes to `world.passes`.
 */
export async function deliver(
  world: World,
  records: DynamoDBRecord[],
  extra: { readonly source?: MeshSource } & Pick<BatchSettings, "budget" | "handover"> = {},
) {
  const { source, ...invocation } = extra;
  const ports = world.batchPorts();
  return await processBatch(
    { Records: records },
    { ...ports, ...(source !== undefined ? { source } : {}) },
    {
      ...world.batchSettings(),
      tables: TABLES,
      concurrency: 4,
      onOutcome: (outcome) => world.passes.push(outcome),
      ...invocation,
    },
  );
}

/** Writes the dataplane to the tables and returns its stream record (old image if given). */
export function put(world: World, item: DataplaneItem, old?: DataplaneItem): DynamoDBRecord {
  world.source.putDataplane(item);
  return dataplaneRecord(TABLES.dataplanes, {
    newImage: item,
    ...(old !== undefined ? { oldImage: old } : {}),
  });
}

export function remove(world: World, item: DataplaneItem): DynamoDBRecord {
  world.source.deleteDataplane(item.mesh, item.name);
  return dataplaneRecord(TABLES.dataplanes, { oldImage: item });
}

export function createMesh(world: World, mesh: string): DynamoDBRecord {
  world.source.putMesh(mesh);
  return meshRecord(TABLES.meshes, mesh);
}

export function deleteMesh(world: World, mesh: string): DynamoDBRecord {
  world.source.deleteMesh(mesh);
  return meshRecord(TABLES.meshes, mesh, { oldImage: meshItem(mesh) });
}

/**
 * Mesh A and dataplane x, which goes r -> s -> t: A and r's record are delivered; the records
 * of the changes to s and to t are returned, not delivered.
 */
export async function xGoesRThenSThenT(world: World) {
  const [r, s, t] = ["r", "s", "t"].map((service) => dataplane("A", "x", [service])) as [
    DataplaneItem,
    DataplaneItem,
    DataplaneItem,
  ];
  await deliver(world, [createMesh(world, "A"), put(world, r)]);
  return { toS: put(world, s, r), toT: put(world, t, s) };
}
