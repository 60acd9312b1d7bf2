/** The 30 s 'did not start' rule and the local effects of controls, on a hand-driven clock. */
import { describe, expect, it } from 'vitest';
import { CallWatch } from '../../sdk/src/call-watch.js';
import type { Call, Engine } from '../../sdk/src/contract.js';
import { EFFECT_MS, LocalEffects } from '../../sdk/src/effects.js';
import type { Clock, TimerHandle } from '../../sdk/src/timing.js';

/** A clock the test moves by hand. */
function manualClock() {
  let now = 0;
  let seq = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  const clock: Clock = {
    now: () => now,
    after: (ms, fn) => {
      timers.set(++seq, { at: now + ms, fn });
      return seq as unknown as TimerHandle;
    },
    cancel: (h) => void timers.delete(h as unknown as number),
  };
  const advance = (ms: number) => {
    now += ms;
    for (const [id, t] of [...timers].sort((a, b) => a[1].at - b[1].at)) {
      if (t.at <= now) {
        timers.delete(id);
        t.fn();
      }
    }
  };
  return { clock, advance, pending: () => timers.size };
}

const call = (id: string, status: Call['status'] = 'queued'): Call => ({
  request_id: id,
  call_id: id,
  direction: 'outbound',
  status,
  error: null,
  display: { name: null, company: null, number: null, contact_reference: null, department: null },
  answered_at: null,
  ended_at: null,
  duration: 0,
  expires_at: 0,
  server_time: 0,
  orphaned: false,
});

describe('CallWatch: the 30 s rule', () => {
  it('fires after exactly 30 s when no call appears', () => {
    const { clock, advance } = manualClock();
    let fired = 0;
    const watch = new CallWatch(clock, () => fired++);
    watch.start('ci_new', null, null);
    advance(29_999);
    watch.check(call('ci_other'));
    expect(fired).toBe(0);
    advance(1);
    expect(fired).toBe(1);
    expect(watch.waiting).toBe(false);
  });

  it('is satisfied by the answered request_id, even one that already failed', () => {
    const { clock, advance, pending } = manualClock();
    let fired = 0;
    const watch = new CallWatch(clock, () => fired++);
    watch.start('ci_new', 'ci_old', call('ci_old', 'completed'));
    advance(10_000);
    watch.check(call('ci_new', 'failed'));
    advance(60_000);
    expect(fired).toBe(0);
    expect(pending()).toBe(0);
  });

  it('without a request_id, is satisfied by any call other than the one shown before', () => {
    const { clock, advance } = manualClock();
    let fired = 0;
    const watch = new CallWatch(clock, () => fired++);
    watch.start(null, 'ci_old', call('ci_old', 'completed'));
    watch.check(call('ci_old', 'completed'));
    expect(watch.waiting).toBe(true);
    watch.check(call('ci_2'));
    advance(31_000);
    expect(fired).toBe(0);
  });

  it('counts a call already in the state when the backend answers', () => {
    const { clock, advance } = manualClock();
    let fired = 0;
    const watch = new CallWatch(clock, () => fired++);
    watch.start('ci_new', null, call('ci_new', 'dialing'));
    advance(31_000);
    expect(fired).toBe(0);
  });

  it('restarts on a new request', () => {
    const { clock, advance } = manualClock();
    let fired = 0;
    const watch = new CallWatch(clock, () => fired++);
    watch.start('ci_1', null, null);
    advance(20_000);
    watch.start('ci_2', null, null);
    advance(20_000);
    expect(fired).toBe(0);
    advance(10_000);
    expect(fired).toBe(1);
  });
});

describe('LocalEffects', () => {
  const engine = (over: Partial<Engine> = {}): Engine => ({
    id: 'e', state: 'ready', live: true, available: true, mic_ready: true, busy: false, muted: false, simulated: true, last_seen_ago: 0, version: 1, client: 'window', ...over,
  });

  it('shows an effect at once and keeps it until a snapshot confirms it', () => {
    let now = 0;
    const fx = new LocalEffects(() => now);
    fx.flag('muted', true);
    expect(fx.applyTo(engine())?.muted).toBe(true);
    fx.confirm(engine({ muted: false }), null); // a snapshot from before the window acted
    expect(fx.applyTo(engine())?.muted).toBe(true);
    fx.confirm(engine({ muted: true }), null);
    expect(fx.active).toBe(false);
    expect(fx.applyTo(engine())?.muted).toBe(false);
  });

  it('reverts only its own effect, and gives way to the snapshots after EFFECT_MS', () => {
    let now = 0;
    const fx = new LocalEffects(() => now);
    const first = fx.flag('available', false);
    fx.flag('available', true);
    first();
    expect(fx.applyTo(engine({ available: false }))?.available).toBe(true);
    now += EFFECT_MS;
    fx.expire();
    expect(fx.applyTo(engine({ available: false }))?.available).toBe(false);
  });

  it('shows an ending while the call is live, and an answer while it rings', () => {
    const fx = new LocalEffects(() => 0);
    fx.pend('answering', call('ci_1', 'incoming'));
    expect(fx.pending).toBe('answering');
    fx.confirm(null, call('ci_1', 'incoming'));
    expect(fx.pending).toBe('answering');
    fx.confirm(null, call('ci_1', 'connected'));
    expect(fx.pending).toBeNull();
    const revert = fx.pend('ending', call('ci_1', 'connected'));
    fx.confirm(null, call('ci_1', 'connected'));
    expect(fx.pending).toBe('ending');
    revert();
    expect(fx.pending).toBeNull();
    fx.pend('ending', call('ci_1', 'connected'));
    fx.confirm(null, call('ci_1', 'completed'));
    expect(fx.pending).toBeNull();
    expect(fx.pend('ending', call('ci_1', 'completed'))).toBeTypeOf('function');
    expect(fx.pending).toBeNull();
  });
});
