/**
 * Stream records through the real batch step on a World's in-memory ports: each helper makes
 * the change in the tables and returns its stream record, as the control plane and DynamoDB
 * Streams would. Shared by the event-path and pass-skip tests.
 */
import type { DynamoDBRecord } from "aws-lambda";
import { processBatch } from "../../functions/allocator/batch/process-batch.ts";
import type { MeshSource } from "../../functions/store/ports.ts";
import { resolveTableNames } from "../../functions/store/table-definitions.ts";
import { type DataplaneItem, dataplaneRecord, meshItem, meshRecord } from "../fixtures/builders.ts";
import { World, type WorldOptions } from "./reconcile-world.ts";

export const TABLES = resolveTableNames({});

export function indexWorld(options: WorldOptions = {}): World {
  return new World({ mode: "index", ...options });
}

/**
 * Runs records through the real batch step, on the world's ports (or a source standing in);
 * the outcome of each pass it runs goes to `world.passes`.
 */
export async function deliver(world: World, records: DynamoDBRecord[], source?: MeshSource) {
  const ports = world.batchPorts();
  return await processBatch(
    { Records: records },
    { ...ports, ...(source !== undefined ? { source } : {}) },
    {
      ...world.batchSettings(),
      tables: TABLES,
      concurrency: 4,
      serviceSet: "index",
      onOutcome: (outcome) => world.passes.push(outcome),
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
