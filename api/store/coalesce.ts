/**
 * Coalesces small requests to the store (and to Redis: rate-limit hits) into one round trip: an
 * item submitted while no flush runs is flushed at the end of the current turn of the event loop
 * (with whatever else arrived in that turn), or after a short wait where no one is waiting on it
 * (`gather`); items submitted while a flush runs wait for it and then go together. An idle node
 * pays no delay, and a busy one makes one round trip for many items instead of one each: a round
 * trip costs CPU on both sides (system calls, wake-ups, a commit) whatever the statement does.
 * Users: commands, heartbeats, acks, WidgetState loads, engine snapshots, credential reads, agent
 * and integration checks, the platform switch, engines offline after a socket drop, the
 * rate-limit increments sent to Redis, the PING that confirms room subscriptions.
 *
 * A flush that fails because the store is out of reach fails every item waiting too, so a caller
 * waits for one timeout for its 503, not for several in a row.
 */
import type { Clock } from '../clock.js';
import { isStatementCancelled, isStoreOutOfReach, type Sql } from './db.js';

/** The most statements a failed batch's items, flushed alone, take at once (a node's pool holds 10 connections by default). */
export const ALONE_AT_ONCE = 4;

export type Flush<I, R> = (items: I[]) => Promise<R[]>;

export interface CoalesceOptions {
  /** most items in one flush */
  max?: number;
  /**
   * When a flush of several items fails, flush each of them alone, so that one bad item (a row a
   * concurrent delete made invalid, say) fails only its own caller. Only for flushes that change
   * nothing when they fail: one statement, which is atomic.
   */
  isolate?: boolean;
  /**
   * For writes no one waits on to see their effect (a window's acks): the first item that finds
   * the queue idle waits this long on `clock` for company, instead of going at the end of the turn.
   * A node at hundreds of such items a second then makes one round trip for several.
   */
  gather?: { clock: Clock; ms: number };
}

export function coalesce<I, R>(flush: Flush<I, R>, options: CoalesceOptions = {}): (item: I) => Promise<R> {
  const max = options.max ?? 500;
  let queue: Array<{ item: I; resolve: (result: R) => void; reject: (error: unknown) => void }> = [];
  let running = false;

  type Entry = (typeof queue)[number];
  /**
   * Flushes each item of a failed batch alone, ALONE_AT_ONCE at a time: all at once, a batch of
   * 500 would ask for 500 connections of a pool of ten, whose waits time out as "out of reach"
   * and fail every other coalescer's queue. Each failure is its item's, unless the store is out of
   * reach, or ALONE_AT_ONCE statements in a row were cancelled on the statement timeout (not one
   * row's lock, then: the store is overloaded): the items left fail at once with that 503, rather
   * than each wait out a timeout of its own on a store that cannot keep up.
   */
  async function alone(batch: Entry[]): Promise<void> {
    let next = 0;
    let cancelledInARow = 0;
    let givenUp: unknown;
    const worker = async () => {
      while (next < batch.length) {
        const entry = batch[next++]!;
        if (givenUp !== undefined) {
          entry.reject(givenUp);
          continue;
        }
        try {
          entry.resolve((await flush([entry.item]))[0]!);
          cancelledInARow = 0;
        } catch (error) {
          entry.reject(error);
          if (isStoreOutOfReach(error) || (isStatementCancelled(error) && ++cancelledInARow >= ALONE_AT_ONCE)) givenUp ??= error;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(ALONE_AT_ONCE, batch.length) }, worker));
  }

  async function drain(): Promise<void> {
    running = true;
    while (queue.length > 0) {
      const batch = queue.slice(0, max);
      queue = queue.slice(batch.length);
      try {
        const results = await flush(batch.map((entry) => entry.item));
        batch.forEach((entry, index) => entry.resolve(results[index]!));
      } catch (error) {
        if (isStoreOutOfReach(error)) {
          // The store is out of reach: retrying each item alone, and then the items queued behind
          // this flush, would each wait out a timeout of their own to learn the same, and callers
          // would wait for several in a row. All fail now with the 503 each would get, and retry
          // (the batched writes are idempotent: request_ids, heartbeats, acks). A statement the
          // server cancelled on its timeout is not this: it may be one item's row lock, so the
          // items are tried alone as for any other failure (`alone` tells an overload from it).
          const waiting = queue;
          queue = [];
          for (const entry of [...batch, ...waiting]) entry.reject(error);
        } else if (options.isolate && batch.length > 1) await alone(batch);
        else for (const entry of batch) entry.reject(error);
      }
    }
    running = false;
  }

  return (item) =>
    new Promise<R>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (running || queue.length > 1) return;
      if (options.gather) options.gather.clock.after(options.gather.ms, drain);
      else setImmediate(() => void drain());
    });
}

/**
 * Reads by a unique key, coalesced: the keys asked for together are read with one statement
 * (`text` takes them as an array in $1) and each caller gets its own row, or undefined. A
 * reconnect storm authenticates thousands of tokens at once this way.
 */
export function lookupTogether<R>(sql: Sql, text: string, keyOf: (row: R) => string): (key: string) => Promise<R | undefined> {
  return coalesce(
    async (keys: string[]) => {
      const rows = await sql.query<R>(text, [[...new Set(keys)]]);
      const byKey = new Map(rows.map((row) => [keyOf(row), row]));
      return keys.map((key) => byKey.get(key));
    },
    { isolate: true },
  );
}
