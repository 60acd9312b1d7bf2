/**
 * The bench's verdicts (loadtest/push/report.ts): a target is judged on the exact figures, never on
 * their rounded display, so a ratio just past a target's edge is reported missed, and shown so.
 */
import { describe, expect, it } from 'vitest';
import { judge, type Comparison } from '../../loadtest/push/report.js';

// judge reads only these fields of a broadcast; the rest of a comparison stays empty.
const broadcast = (net: number) => ({ per_message_us_net: net, per_message_user_us_net: 0, delivered: 10, expected_deliveries: 10 });
const comparison = (gateway: number, uws: number) =>
  ({ sockets: 10, gateway: { broadcast: broadcast(gateway) }, uws: { broadcast: broadcast(uws) }, sio: {} }) as unknown as Comparison;
const vsUws = (gateway: number, uws: number) => judge(undefined, comparison(gateway, uws)).find((t) => t.id === 'b.vs_uws')!;

describe('bench verdicts', () => {
  it('judges a ratio on its exact value, and shows enough digits to see why', () => {
    expect(vsUws(11.883, 9.14)).toMatchObject({ met: false, value: '11.883 µs ÷ 9.14 µs = 1.3001×' });
    expect(vsUws(13, 10)).toMatchObject({ met: true, value: '13 µs ÷ 10 µs = 1.3×' });
    expect(vsUws(10.5, 10)).toMatchObject({ met: true, value: '10.5 µs ÷ 10 µs = 1.05×' });
  });

  it('judges no ratio on a run whose clients missed messages, on either side', () => {
    const short = { ...broadcast(13), delivered: 9 };
    const judged = (gateway: object, uws: object) =>
      judge(undefined, { sockets: 10, gateway: { broadcast: gateway }, uws: { broadcast: uws }, sio: {} } as unknown as Comparison).find((t) => t.id === 'b.vs_uws')!;
    expect(judged(broadcast(10), short).met).toBe(false);
    expect(judged(short, broadcast(10)).met).toBe(false);
  });

  it("shows the user-space split but never judges it (getrusage's split of user from kernel time is sampled)", () => {
    const split = (user: number) => ({ ...broadcast(10), per_message_user_us_net: user });
    const row = judge(undefined, { sockets: 10, gateway: { broadcast: split(1) }, uws: { broadcast: split(2) }, sio: {} } as unknown as Comparison).find((t) => t.id === 'b.vs_uws_user')!;
    expect(row.met).toBeNull();
    expect(row.value).toContain('indicative');
  });
});

describe('bench verdicts, target by target', () => {
  // judge reads only these fields of part (a)'s result
  const partA = (over: { p50?: number; p99?: number; undelivered?: number; failed?: number; complete?: boolean; allDone?: boolean } = {}) =>
    ({
      complete: over.complete ?? true,
      rate_per_s: 1000,
      drain_s: 30,
      sockets: { opened: 10_000, failed: over.failed ?? 0 },
      commands: { sent: 35_000, undelivered: over.undelivered ?? 0 },
      latency: { count: 30_000, p50_ms: over.p50 ?? 2, p99_ms: over.p99 ?? 5 },
      polling_baseline: { mean_staleness_ms: 1500 },
      audit: { commands: 35_000, all_done: over.allDone ?? true },
    }) as unknown as Parameters<typeof judge>[0];
  const a = (id: string, over: Parameters<typeof partA>[0] = {}) => judge(partA(over), undefined).find((t) => t.id === id)!.met;

  it('(a) p99 at most 5 ms, on a complete run only', () => {
    expect(a('a.p99', { p99: 5 })).toBe(true);
    expect(a('a.p99', { p99: 5.001 })).toBe(false);
    expect(a('a.p99', { p99: 1, undelivered: 1 })).toBe(false);
    expect(a('a.p99', { p99: 1, failed: 1 })).toBe(false);
    expect(a('a.p99', { p99: 1, complete: false })).toBe(false);
  });

  it('(a) polling staleness at least 100× the push median, on a complete run only', () => {
    expect(a('a.vs_polling', { p50: 15 })).toBe(true);
    expect(a('a.vs_polling', { p50: 15.001 })).toBe(false);
    expect(a('a.vs_polling', { p50: 1, undelivered: 1 })).toBe(false);
    expect(a('a.audit')).toBe(true);
    expect(a('a.audit', { allDone: false })).toBe(false);
  });

  const broadcastOf = (net: number, delivered = 10) => ({ per_message_us_net: net, per_message_user_us_net: 0, delivered, expected_deliveries: 10 });
  const memoryOf = (bytes: number) => ({ per_connection_bytes: bytes, heap_per_connection_bytes: 0 });
  const storm = (seconds: number, over: Record<string, unknown> = {}) => ({ sockets: 100, seconds, opened: 100, failed: 0, retries: 0, errors: {}, ...over });
  const snapshots = (stale = 0) => ({ widgets: 50, widgets_current: 50 - stale, widgets_stale: stale, engines: 50, engines_with_work: 50 });
  const c = (parts: { gateway?: object; uws?: object; sio?: object }) =>
    ({ sockets: 100, gateway: parts.gateway ?? {}, uws: parts.uws ?? {}, sio: parts.sio ?? {} }) as unknown as Comparison;
  const met = (id: string, comparison: Comparison) => judge(undefined, comparison).find((t) => t.id === id)!.met;

  it('(b) Socket.IO on Node http at least 6× the gateway: Socket.IO is the numerator', () => {
    expect(met('b.vs_sio', c({ gateway: { broadcast: broadcastOf(3) }, sio: { broadcast: broadcastOf(18) } }))).toBe(true);
    expect(met('b.vs_sio', c({ gateway: { broadcast: broadcastOf(3.001) }, sio: { broadcast: broadcastOf(18) } }))).toBe(false);
    expect(met('b.vs_sio', c({ gateway: { broadcast: broadcastOf(18) }, sio: { broadcast: broadcastOf(3) } }))).toBe(false);
    expect(met('b.vs_sio', c({ gateway: { broadcast: broadcastOf(1) }, sio: { broadcast: broadcastOf(18, 9) } }))).toBe(false);
  });

  it('(c) at most 10,240 B per connection, and at most half of Socket.IO on Node http; RSS noise is not judged', () => {
    expect(met('c.bytes', c({ gateway: { memory: memoryOf(10_240) } }))).toBe(true);
    expect(met('c.bytes', c({ gateway: { memory: memoryOf(10_241) } }))).toBe(false);
    expect(met('c.bytes', c({ gateway: { memory: memoryOf(-5) } }))).toBeNull();
    expect(met('c.vs_sio', c({ gateway: { memory: memoryOf(5000) }, sio: { memory: memoryOf(10_000) } }))).toBe(true);
    expect(met('c.vs_sio', c({ gateway: { memory: memoryOf(5001) }, sio: { memory: memoryOf(10_000) } }))).toBe(false);
    expect(met('c.vs_sio', c({ gateway: { memory: memoryOf(5000) }, sio: { memory: memoryOf(-1) } }))).toBeNull();
  });

  it('(d) back within 1.5× of raw uWS, every client with a current snapshot, against a clean baseline', () => {
    const d = (gateway: object, uws: object) => met('d.storm', c({ gateway: { storm: gateway }, uws: { storm: uws } }));
    expect(d(storm(1.5, { snapshots: snapshots() }), storm(1))).toBe(true);
    expect(d(storm(1.501, { snapshots: snapshots() }), storm(1))).toBe(false);
    expect(d(storm(1, { snapshots: snapshots(1) }), storm(1))).toBe(false);
    expect(d(storm(1, { snapshots: snapshots(), failed: 1 }), storm(1))).toBe(false);
    expect(d(storm(1, { snapshots: snapshots() }), storm(1, { opened: 90, failed: 10 }))).toBe(false);
  });
});
