/** Coalesced writes: one flush per turn when idle, one per in-flight flush when busy, failures kept to their batch. */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../api/clock.js';
import { ALONE_AT_ONCE, coalesce } from '../../api/store/coalesce.js';
import { StoreUnavailable } from '../../api/store/pg.js';

function recording(fail?: (items: number[]) => boolean, isolate = false) {
  const batches: number[][] = [];
  let release: () => void = () => {};
  let held = false;
  const submit = coalesce<number, number>(async (items) => {
    batches.push(items);
    if (held) await new Promise<void>((r) => (release = r));
    if (fail?.(items)) throw new Error(`batch ${items.join(',')} failed`);
    return items.map((n) => n * 10);
  }, { max: 3, isolate });
  return { batches, submit, hold: () => void (held = true), release: () => { held = false; release(); } };
}

describe('coalesce', () => {
  it('flushes what arrived in one turn together, each caller getting its own result', async () => {
    const r = recording();
    expect(await Promise.all([r.submit(1), r.submit(2)])).toEqual([10, 20]);
    expect(await r.submit(3)).toBe(30);
    expect(r.batches).toEqual([[1, 2], [3]]);
  });

  it('holds what arrives during a flush for the next one, at most max at a time', async () => {
    const r = recording();
    r.hold();
    const first = r.submit(1);
    await new Promise((resolve) => setImmediate(resolve));
    const later = [2, 3, 4, 5].map((n) => r.submit(n));
    r.release();
    expect(await Promise.all([first, ...later])).toEqual([10, 20, 30, 40, 50]);
    expect(r.batches).toEqual([[1], [2, 3, 4], [5]]);
  });

  it('rejects only the callers of a failed flush; the next flush goes ahead', async () => {
    const r = recording((items) => items.includes(2));
    const results = await Promise.allSettled([r.submit(1), r.submit(2)]);
    expect(results.map((x) => x.status)).toEqual(['rejected', 'rejected']);
    expect(await r.submit(3)).toBe(30);
  });

  it('with isolate, flushes each item of a failed batch alone: only the bad item fails', async () => {
    const r = recording((items) => items.includes(2), true);
    const results = await Promise.allSettled([r.submit(1), r.submit(2), r.submit(3)]);
    expect(results.map((x) => (x.status === 'fulfilled' ? x.value : 'failed'))).toEqual([10, 'failed', 30]);
    expect(r.batches).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it('fails every item at once when the store is out of reach: none alone, none queued behind waits out its own timeout', async () => {
    const batches: number[][] = [];
    let down = true;
    let release: () => void = () => {};
    const submit = coalesce<number, number>(async (items) => {
      batches.push(items);
      if (!down) return items.map((n) => n * 10);
      await new Promise<void>((resolve) => (release = resolve)); // a statement stuck until its timeout
      throw new StoreUnavailable(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    }, { max: 3, isolate: true });
    const stuck = [submit(1), submit(2)];
    await new Promise((resolve) => setImmediate(resolve));
    const queued = [3, 4, 5, 6].map((n) => submit(n));
    release();
    const results = await Promise.allSettled([...stuck, ...queued]);
    expect(results.map((x) => (x.status === 'rejected' ? (x.reason as { code: string }).code : x.value))).toEqual(Array(6).fill('service_unavailable'));
    expect(batches).toEqual([[1, 2]]);
    down = false;
    expect(await submit(7)).toBe(70);
  });

  it('tries each item alone when the server cancelled the statement on its timeout (perhaps one row locked)', async () => {
    const batches: number[][] = [];
    const submit = coalesce<number, number>(async (items) => {
      batches.push(items);
      if (items.includes(2)) throw new StoreUnavailable(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }));
      return items.map((n) => n * 10);
    }, { max: 3, isolate: true });
    const results = await Promise.allSettled([submit(1), submit(2), submit(3)]);
    expect(results.map((x) => (x.status === 'fulfilled' ? x.value : (x.reason as { code: string }).code))).toEqual([10, 'service_unavailable', 30]);
    expect(batches).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it('flushes the items of a failed batch alone a few at a time, so that a batch of hundreds does not ask the pool for hundreds of connections', async () => {
    let running = 0;
    let most = 0;
    const alone: number[] = [];
    const submit = coalesce<number, number>(async (items) => {
      if (items.length > 1) throw new Error('one bad row');
      alone.push(items[0]!);
      running += 1;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 5));
      running -= 1;
      if (items[0] === 7) throw new Error('the bad row');
      return [items[0]! * 10];
    }, { max: 20, isolate: true });
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => submit(i)));
    expect(results.map((x) => (x.status === 'fulfilled' ? x.value : 'failed'))).toEqual(Array.from({ length: 20 }, (_, i) => (i === 7 ? 'failed' : i * 10)));
    expect(alone.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(most).toBe(ALONE_AT_ONCE);
  });

  it('gives up flushing alone once several in a row were cancelled on the statement timeout (an overloaded store, not one locked row): the rest fail at once', async () => {
    const batches: number[][] = [];
    const submit = coalesce<number, number>(async (items) => {
      batches.push(items);
      throw new StoreUnavailable(Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' }));
    }, { max: 20, isolate: true });
    const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => submit(i)));
    expect(results.every((x) => x.status === 'rejected' && (x.reason as { code: string }).code === 'service_unavailable')).toBe(true);
    // the batch, then the items alone until ALONE_AT_ONCE were cancelled in a row (and those already
    // under way then): not the 20
    expect(batches[0]).toHaveLength(20);
    const alone = batches.slice(1);
    expect(alone.every((items) => items.length === 1)).toBe(true);
    expect(alone.length).toBeGreaterThanOrEqual(ALONE_AT_ONCE);
    expect(alone.length).toBeLessThan(2 * ALONE_AT_ONCE);
  });

  it('with gather, holds the first item of an idle queue for the given time, and what arrives meanwhile goes with it', async () => {
    const clock = new ManualClock();
    const batches: number[][] = [];
    const submit = coalesce<number, number>(async (items) => (batches.push(items), items.map((n) => n * 10)), { gather: { clock, ms: 10 } });
    const first = submit(1);
    await new Promise((resolve) => setImmediate(resolve));
    const second = submit(2);
    await clock.advance(9);
    expect(batches).toEqual([]);
    await clock.advance(1);
    expect(await Promise.all([first, second])).toEqual([10, 20]);
    const third = submit(3);
    await clock.advance(10);
    expect(await third).toBe(30);
    expect(batches).toEqual([[1, 2], [3]]);
  });
});
