/** The widget state machine: the transition table, the derivation from inputs, and refusals. */
import { describe, expect, it } from 'vitest';
import { call, engine } from './fixtures.js';
import { OPERATIONAL, StateMachine, TRANSITIONS, WIDGET_STATES, canTransition, deriveState, type MachineInputs, type WidgetStateName } from '../../sdk/src/machine.js';



const base: MachineInputs = { session: 'active', transport: 'push', hasSnapshot: true, engine: engine(), call: null, launching: false, inbound: true };
const derive = (over: Partial<MachineInputs>) => deriveState({ ...base, ...over });

/** Inputs that derive each state (used to drive the machine through every allowed edge). */
const INPUTS: Record<WidgetStateName, Partial<MachineInputs>> = {
  init: { session: 'none' },
  connecting: { session: 'loading', hasSnapshot: false },
  offline: { engine: null },
  enabling: { engine: null, launching: true },
  ready: {},
  unavailable: { engine: engine({ available: false }) },
  no_mic: { engine: engine({ state: 'enabling', mic_ready: false }) },
  call: { call: call('connected') },
  reconnecting: { transport: 'down' },
  unauthorized: { session: 'unauthorized' },
  error: { session: 'error' },
};

describe('deriveState', () => {
  it('derives every state from its inputs', () => {
    for (const state of WIDGET_STATES) expect(derive(INPUTS[state]), state).toBe(state);
  });

  it('puts the session before the transport, the transport before the call, the call before the engine', () => {
    expect(derive({ session: 'unauthorized', transport: 'down', call: call('connected') })).toBe('unauthorized');
    expect(derive({ session: 'error', hasSnapshot: false })).toBe('error');
    expect(derive({ session: 'renewing' })).toBe('reconnecting');
    expect(derive({ transport: 'down', call: call('connected') })).toBe('reconnecting');
    expect(derive({ session: 'renewing', hasSnapshot: false })).toBe('connecting');
    expect(derive({ transport: 'poll', call: call('incoming') })).toBe('call');
  });

  it('shows a live call whatever the window, an orphaned one included', () => {
    expect(derive({ engine: engine({ state: 'closed', live: false }), call: call('connected', { orphaned: true }) })).toBe('call');
    expect(derive({ engine: null, call: call('queued') })).toBe('call');
    for (const status of ['completed', 'rejected', 'busy', 'no_answer', 'canceled', 'failed', 'expired'] as const) {
      expect(derive({ call: call(status) }), status).toBe('ready');
    }
  });

  it('says offline for a missing, offline or closed window, and enabling while a launched one is on its way', () => {
    for (const e of [null, engine({ state: 'offline', live: false }), engine({ state: 'closed', live: false })]) {
      expect(derive({ engine: e })).toBe('offline');
      expect(derive({ engine: e, launching: true })).toBe('enabling');
    }
    expect(derive({ engine: engine({ state: 'enabling', mic_ready: false }), launching: true })).toBe('enabling');
    expect(derive({ launching: true })).toBe('ready');
  });

  it('says unavailable for a window not Available only while incoming calls are allowed: without them it is ready', () => {
    expect(derive({ engine: engine({ available: false }) })).toBe('unavailable');
    expect(derive({ engine: engine({ available: false }), inbound: false })).toBe('ready');
  });
});

describe('the transition table', () => {
  it('names every state, and every target is a state', () => {
    expect(Object.keys(TRANSITIONS).sort()).toEqual([...WIDGET_STATES].sort());
    for (const targets of Object.values(TRANSITIONS)) for (const to of targets) expect(WIDGET_STATES).toContain(to);
  });

  it('lets the machine take every allowed transition, driven by derived inputs', () => {
    let edges = 0;
    for (const from of WIDGET_STATES) {
      for (const to of TRANSITIONS[from]) {
        const m = new StateMachine();
        m.state = from;
        expect(m.update({ ...base, ...INPUTS[to] }), `${from} → ${to}`).toEqual({ from, to, refused: false });
        expect(m.state).toBe(to);
        edges++;
      }
    }
    expect(edges).toBe(2 + 8 + 6 * 8 + 8);
  });

  it('refuses every transition not in the table and stays put', () => {
    for (const from of WIDGET_STATES) {
      for (const to of WIDGET_STATES) {
        if (from === to || canTransition(from, to)) continue;
        const m = new StateMachine();
        m.state = from;
        expect(m.go(to), `${from} → ${to}`).toEqual({ from, to, refused: true });
        expect(m.state).toBe(from);
      }
    }
  });

  it('keeps unauthorized and error terminal: a late snapshot cannot revive the widget', () => {
    for (const terminal of ['unauthorized', 'error'] as const) {
      const m = new StateMachine();
      m.state = terminal;
      for (const to of WIDGET_STATES) if (to !== terminal) expect(m.go(to)?.refused).toBe(true);
    }
  });

  it('never takes an operational widget back to init or connecting', () => {
    for (const from of [...OPERATIONAL, 'reconnecting'] as const) {
      expect(canTransition(from, 'init')).toBe(false);
      expect(canTransition(from, 'connecting')).toBe(false);
    }
  });

  it('does nothing when the derived state is the current one', () => {
    const m = new StateMachine();
    m.state = 'ready';
    expect(m.update(base)).toBeNull();
  });

  it('walks a whole session: load, window, call, loss of contact, refusal', () => {
    const m = new StateMachine();
    const seen: string[] = [];
    const step = (over: Partial<MachineInputs>) => {
      m.update({ ...base, ...over });
      seen.push(m.state);
    };
    step({ session: 'loading', hasSnapshot: false });
    step({ engine: null });
    step({ engine: null, launching: true });
    step({ engine: engine({ state: 'enabling', mic_ready: false }), launching: true });
    step({});
    step({ call: call('incoming', { direction: 'inbound' }) });
    step({ call: call('connected') });
    step({ transport: 'down', call: call('connected') });
    step({ transport: 'poll', call: call('completed') });
    step({ session: 'renewing' });
    step({ session: 'unauthorized' });
    step({});
    expect(seen).toEqual(['connecting', 'offline', 'enabling', 'enabling', 'ready', 'call', 'call', 'reconnecting', 'ready', 'reconnecting', 'unauthorized', 'unauthorized']);
  });
});
