import type { AttributeValue, DynamoDBRecord } from "aws-lambda";

/** Which input table a stream record came from. */
export type InputTable = "meshes" | "dataplanes";

function stringAt(value: AttributeValue | undefined): string | undefined {
  return typeof value?.S === "string" && value.S !== "" ? value.S : undefined;
}

/** Meshes named by an ingress image's `networking.ingress.availableServices[].mesh`. */
function ingressMeshes(image: Record<string, AttributeValue> | undefined): string[] {
  const available = image?.networking?.M?.ingress?.M?.availableServices?.L;
  if (!Array.isArray(available)) return [];
  const meshes: string[] = [];
  for (const entry of available) {
    const mesh = stringAt(entry?.M?.mesh);
    if (mesh !== undefined) meshes.push(mesh);
  }
  return meshes;
}

/**
 * The meshes whose VIP item a stream record can change, as the local tools see it (for
 * progress and diffs; the allocator decides for itself): a mesh record touches its mesh; a
 * dataplane record touches the mesh it is stored under and, for an ingress, every mesh its old
 * or new image advertises services for.
 */
export function meshesTouchedBy(record: DynamoDBRecord, table: InputTable): string[] {
  const image = record.dynamodb;
  const meshes = new Set<string>();
  const key = table === "meshes" ? stringAt(image?.Keys?.name) : stringAt(image?.Keys?.mesh);
  if (key !== undefined) meshes.add(key);
  if (table === "dataplanes") {
    for (const mesh of ingressMeshes(image?.NewImage)) meshes.add(mesh);
    for (const mesh of ingressMeshes(image?.OldImage)) meshes.add(mesh);
  }
  return [...meshes];
}
