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
