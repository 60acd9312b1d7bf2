/**
 * The widget's state machine (spec section 3 lists the states; the transitions are ours, in
 * docs/sdk.md). A pure function derives the state the inputs call for; a table says which
 * transitions are allowed; the machine applies a derived state only along an allowed edge.
 */
import { isLive, type Call, type Engine } from './contract.js';

export const WIDGET_STATES = [
  'init',
  'connecting',
  'offline',
  'enabling',
  'ready',
  'unavailable',
  'no_mic',
  'call',
  'reconnecting',
  'unauthorized',
  'error',
] as const;
export type WidgetStateName = (typeof WIDGET_STATES)[number];

/** States in which the SDK holds a current snapshot and shows the agent's window and call. */
export const OPERATIONAL: readonly WidgetStateName[] = ['offline', 'enabling', 'ready', 'unavailable', 'no_mic', 'call'];

const others = (list: readonly WidgetStateName[], self: WidgetStateName) => list.filter((s) => s !== self);
const operationalFrom = (self: WidgetStateName): WidgetStateName[] => [...others(OPERATIONAL, self), 'reconnecting', 'unauthorized', 'error'];

/** Allowed transitions. unauthorized and error are terminal for this instance (a page load or a new init() starts again). */
export const TRANSITIONS: Readonly<Record<WidgetStateName, readonly WidgetStateName[]>> = {
  init: ['connecting', 'error'],
  connecting: [...OPERATIONAL, 'unauthorized', 'error'],
  offline: operationalFrom('offline'),
  enabling: operationalFrom('enabling'),
  ready: operationalFrom('ready'),
  unavailable: operationalFrom('unavailable'),
  no_mic: operationalFrom('no_mic'),
  call: operationalFrom('call'),
  reconnecting: [...OPERATIONAL, 'unauthorized', 'error'],
  unauthorized: [],
  error: [],
};

export function canTransition(from: WidgetStateName, to: WidgetStateName): boolean {
  return TRANSITIONS[from].includes(to);
}

/**
 * none: init() not started; loading: asking sessionEndpoint for the first time; active: a token
 * works; renewing: a token was rejected and sessionEndpoint is being asked again;
 * unauthorized: the session was refused; error: the service refused for good (platform_disabled)
 * or the integration is misconfigured.
 */
export type SessionStatus = 'none' | 'loading' | 'active' | 'renewing' | 'unauthorized' | 'error';

/** push: socket connected; poll: socket down, polling answers; down: nothing answers. */
export type TransportStatus = 'push' | 'poll' | 'down';

export interface MachineInputs {
  session: SessionStatus;
  transport: TransportStatus;
  /** whether a snapshot (GET /widget/state or a push) has been applied */
  hasSnapshot: boolean;
  engine: Engine | null;
  call: Call | null;
  /** enableCalls() opened a window that has not become ready yet */
  launching: boolean;
  /**
   * The policy allows incoming calls. Availability is about receiving them: without them, a
   * window left not Available (an operator turned incoming off meanwhile) is simply ready, and the
   * widget, which hides the Available toggle then, never shows a state the agent cannot leave.
   */
  inbound: boolean;
}

/** The state the inputs call for, in priority order (first match wins; see docs/sdk.md). */
export function deriveState(i: MachineInputs): WidgetStateName {
  if (i.session === 'unauthorized') return 'unauthorized';
  if (i.session === 'error') return 'error';
  if (i.session === 'none') return 'init';
  if (!i.hasSnapshot) return 'connecting';
  if (i.session === 'renewing' || i.transport === 'down') return 'reconnecting';
  if (isLive(i.call)) return 'call';
  const engine = i.engine;
  if (!engine || engine.state === 'offline' || engine.state === 'closed') return i.launching ? 'enabling' : 'offline';
  if (engine.state === 'enabling' || !engine.mic_ready) return i.launching ? 'enabling' : 'no_mic';
  return engine.available || !i.inbound ? 'ready' : 'unavailable';
}

export interface Transition {
  from: WidgetStateName;
  to: WidgetStateName;
  /** true when the table refused it: the state stayed `from` */
  refused: boolean;
}

/** Holds the current state; moves only along allowed edges. */
export class StateMachine {
  state: WidgetStateName = 'init';

  /** Moves to `to` if allowed; returns what happened, or null when `to` is the current state. */
  go(to: WidgetStateName): Transition | null {
    const from = this.state;
    if (from === to) return null;
    if (!canTransition(from, to)) return { from, to, refused: true };
    this.state = to;
    return { from, to, refused: false };
  }

  /** Derives the state from the inputs and moves there. */
  update(inputs: MachineInputs): Transition | null {
    return this.go(deriveState(inputs));
  }
}
