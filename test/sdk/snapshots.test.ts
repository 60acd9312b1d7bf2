/** Snapshot version ordering and the server-duration call timer. */
import { describe, expect, it } from 'vitest';
import type { Call, WidgetState } from '../../sdk/src/contract.js';
import { Snapshots, formatDuration } from '../../sdk/src/snapshots.js';

const policy = { outbound: true, inbound: true, number_visibility: 'show', controls: [], widget: { position: 'bottom-right', language: 'en', window_mode: 'popup' }, max_call_seconds: 3600 } as const;

const snapshot = (version: number, over: Partial<WidgetState> = {}): WidgetState => ({
  ok: true,
  engine: null,
  call: null,
  policy: { ...policy, controls: [] },
  agent: { name: 'Ana', identifier: 'ana@acme.example', type: 'email', department: null },
  version,
  server_time: 1_000_000,
  poll_ms: 3000,
  session_expires_at: 1_001_800,
  realtime: { url: 'http://gw', path: '/socket.io', available: true },
  failed_command: null,
  ...over,
});

const connected = (answeredAt: number, over: Partial<Call> = {}): Call => ({
  request_id: 'ci_1',
  call_id: 'ci_1',
  direction: 'outbound',
  status: 'connected',
  error: null,
  display: { name: null, company: null, number: null, contact_reference: null, department: null },
  answered_at: answeredAt,
  ended_at: null,
  duration: 0,
  expires_at: 0,
  server_time: 0,
  orphaned: false,
  ...over,
});

describe('Snapshots: version ordering', () => {
  it("applies another agent's state whatever its version (versions count per agent), then orders that agent's by version", () => {
    const s = new Snapshots(() => 0);
    const bob = { name: 'Bob', identifier: 'bob@acme.example', type: 'email', department: null } as const;
    s.offer(snapshot(50, { call: connected(1) }));
    expect(s.offer(snapshot(7, { agent: bob }))).toBe(true);
    expect(s.state).toMatchObject({ version: 7, agent: { name: 'Bob' }, call: null });
    expect(s.offer(snapshot(6, { agent: bob, call: connected(1) }))).toBe(false);
    expect(s.state?.version).toBe(7);
  });

  it('forgets the held state when told, and still says one was seen', () => {
    const s = new Snapshots(() => 0);
    expect(s.seen).toBe(false);
    s.offer(snapshot(50));
    s.forget();
    expect(s.state).toBeNull();
    expect(s.seen).toBe(true);
    expect(s.offer(snapshot(3))).toBe(true);
  });

  it('applies a newer version and ignores an older or equal one', () => {
    let now = 0;
    const s = new Snapshots(() => now);
    expect(s.offer(snapshot(5))).toBe(true);
    expect(s.offer(snapshot(4, { engine: null, call: connected(1) }))).toBe(false);
    expect(s.state?.version).toBe(5);
    expect(s.state?.call).toBeNull();
    expect(s.offer(snapshot(5, { call: connected(1) }))).toBe(false);
    expect(s.state?.call).toBeNull();
    expect(s.offer(snapshot(6, { call: connected(1) }))).toBe(true);
    expect(s.state?.call?.status).toBe('connected');
  });

  it("takes a poll's full answer at the held version when it shows something else (a node had built the held one from a policy cached before the operator's change), but not a push's", () => {
    let now = 0;
    const s = new Snapshots(() => now);
    const stale = snapshot(5, { policy: { ...policy, controls: ['mute'] } });
    expect(s.offer(stale)).toBe(true);
    const corrected = snapshot(5, { policy: { ...policy, controls: [] }, server_time: 1_000_010 });
    // a push of the same version is a repeat (pushes go out once per version): ignored
    expect(s.offer(corrected)).toBe(false);
    expect(s.state?.policy.controls).toEqual(['mute']);
    // a poll's full answer at the same version moved its tag: the correction is shown
    now = 10;
    expect(s.offer(corrected, true)).toBe(true);
    expect(s.state?.policy.controls).toEqual([]);
    // and the same again applies nothing more, whatever its clocks say (a live call's duration and server_time, an expiry a push lacked)
    const { session_expires_at: _, ...withoutExpiry } = corrected;
    expect(s.offer({ ...withoutExpiry, server_time: 1_000_020, call: connected(1, { duration: 19, server_time: 1_000_020 }) }, true)).toBe(false);
    expect(s.state?.call).toBeNull();
    // an older version stays ignored, polled or not
    expect(s.offer(snapshot(4, { policy: { ...policy, controls: ['dtmf'] } }), true)).toBe(false);
    expect(s.state?.version).toBe(5);
  });

  it('handles pushes and polls arriving out of order', () => {
    const s = new Snapshots(() => 0);
    const arrivals = [3, 1, 4, 2, 7, 5, 6];
    const applied = arrivals.filter((v) => s.offer(snapshot(v)));
    expect(applied).toEqual([3, 4, 7]);
    expect(s.version).toBe(7);
  });

  it('keeps the held session_expires_at when a push lacks it', () => {
    const s = new Snapshots(() => 0);
    s.offer(snapshot(1, { session_expires_at: 1_001_800 }));
    const pushed = snapshot(2);
    delete pushed.session_expires_at;
    s.offer(pushed);
    expect(s.state?.session_expires_at).toBe(1_001_800);
    s.offer(snapshot(3, { session_expires_at: 1_003_600 }));
    expect(s.state?.session_expires_at).toBe(1_003_600);
  });
});

describe('Snapshots: the server clock and the call timer', () => {
  it('computes server_time − answered_at plus the local time since the snapshot was received', () => {
    let now = 50_000; // the browser's clock is far from the server's: it must not matter
    const s = new Snapshots(() => now);
    const call = connected(1_000_000 - 42);
    s.offer(snapshot(1, { server_time: 1_000_000, call }));
    expect(s.durationOf(call)).toBe(42);
    now += 2_500;
    expect(s.durationOf(call)).toBe(44);
    now += 500;
    expect(s.durationOf(call)).toBe(45);
  });

  it('re-anchors on the next snapshot instead of running freely', () => {
    let now = 0;
    const s = new Snapshots(() => now);
    const call = connected(1000);
    s.offer(snapshot(1, { server_time: 1010, call }));
    now += 60_000; // the tab slept: local time says 70 s
    expect(s.durationOf(call)).toBe(70);
    s.offer(snapshot(2, { server_time: 1030, call })); // the server says 30 s
    expect(s.durationOf(call)).toBe(30);
    now += 1000;
    expect(s.durationOf(call)).toBe(31);
  });

  it('refreshes the clock from a same-version snapshot, never from an older one', () => {
    let now = 0;
    const s = new Snapshots(() => now);
    const call = connected(1000);
    s.offer(snapshot(2, { server_time: 1010, call }));
    now = 5000;
    s.offer(snapshot(1, { server_time: 1100, call })); // stale: ignored entirely
    expect(s.durationOf(call)).toBe(15);
    s.offer(snapshot(2, { server_time: 1020, call })); // same version (a reconnect): re-anchor
    expect(s.durationOf(call)).toBe(20);
  });

  it('has no duration before the answer, and the server figure after the end', () => {
    const s = new Snapshots(() => 0);
    s.offer(snapshot(1));
    expect(s.durationOf(connected(1, { answered_at: null, status: 'ringing' }))).toBeNull();
    expect(s.durationOf(null)).toBeNull();
    expect(s.durationOf(connected(1000, { status: 'completed', ended_at: 1090, duration: 90 }))).toBe(90);
  });

  it('estimates the server clock from the last snapshot', () => {
    let now = 123;
    const s = new Snapshots(() => now);
    expect(s.serverNowMs()).toBe(123);
    s.offer(snapshot(1, { server_time: 2000 }));
    now += 1500;
    expect(s.serverNowMs()).toBe(2_001_500);
  });

  it('formats durations', () => {
    expect(formatDuration(0)).toBe('00:00');
    expect(formatDuration(65)).toBe('01:05');
    expect(formatDuration(3725)).toBe('1:02:05');
  });
});
