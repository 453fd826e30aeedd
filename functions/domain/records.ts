/**
 * Records keyed by user names (services, meshes). Names are data: `__proto__`, `constructor`
 * and `toString` are as valid as `web`, so these records have no prototype, and lookups go
 * through {@link own} so an inherited member can never be mistaken for an entry.
 */

/** An empty record without a prototype. */
export function emptyRecord<T = unknown>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

/** `Object.fromEntries`, into a record without a prototype. */
export function recordOf<T>(entries: Iterable<readonly [string, T]>): Record<string, T> {
  const out = emptyRecord<T>();
  for (const [key, value] of entries) out[key] = value;
  return out;
}

/** The entry `key` of `record`, never an inherited member. */
export function own<T>(
  record: Readonly<Record<string, T>> | undefined,
  key: string,
): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}
