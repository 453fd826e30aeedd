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

/**
 * Runs `work` on every item, at most `concurrency` at once (at least one), in order of the
 * items; the one worker pool of the allocator, the index adapter and the reader.
 *
 * After a failure no further item starts, the items under way finish, and the first error is
 * thrown then: nothing a caller settles after a failure is still running behind its back.
 * `stop`, checked before each item starts, ends the run early the same way, without an error.
 * Returns how many items were started.
 */
export async function inPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
  stop?: (started: number) => boolean,
): Promise<number> {
  let next = 0;
  let failure: { error: unknown } | undefined;
  const worker = async (): Promise<void> => {
    while (next < items.length && failure === undefined && stop?.(next) !== true) {
      const item = items[next++] as T;
      try {
        await work(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  const workers = Math.min(Math.max(1, concurrency), items.length);
  await Promise.all(Array.from({ length: workers }, worker));
  if (failure !== undefined) throw failure.error;
  return next;
}
