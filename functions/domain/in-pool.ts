/**
 * Runs `work` on every item, at most `concurrency` at once (at least one), in order of the
 * items; the one worker pool of the allocator, the index adapter and the reader.
 */
export async function inPool<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  };
  const workers = Math.min(Math.max(1, concurrency), items.length);
  await Promise.all(Array.from({ length: workers }, worker));
}
