/**
 * Coalesces small writes into one statement: an item submitted while no flush runs is flushed at
 * the end of the current turn of the event loop (with whatever else arrived in that turn); items
 * submitted while a flush runs wait for it and then go together. An idle node pays no delay, and
 * a busy one makes one round trip for many items instead of one each.
 */
export type Flush<I, R> = (items: I[]) => Promise<R[]>;

export function coalesce<I, R>(flush: Flush<I, R>, options: { max?: number } = {}): (item: I) => Promise<R> {
  const max = options.max ?? 500;
  let queue: Array<{ item: I; resolve: (result: R) => void; reject: (error: unknown) => void }> = [];
  let running = false;

  async function drain(): Promise<void> {
    running = true;
    while (queue.length > 0) {
      const batch = queue.slice(0, max);
      queue = queue.slice(batch.length);
      try {
        const results = await flush(batch.map((entry) => entry.item));
        batch.forEach((entry, index) => entry.resolve(results[index]!));
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    running = false;
  }

  return (item) =>
    new Promise<R>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (!running && queue.length === 1) setImmediate(() => void drain());
    });
}
