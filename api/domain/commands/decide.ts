/**
 * Which widget commands fit which state (spec section 4, "Widget commands"), as a pure decision:
 * refused with a catalogue code, carried out by the server at once, or queued for the call window.
 * Hangup and decline are the server's (through the provider), so they work when the window lost
 * the call or is gone; answer, mute, unmute, dtmf and focus need the window's voice device. The
 * call is the one the command names (its ref), which may have ended, else the agent's live call.
 */
import type { ErrorCode } from '../../../shared/errors.js';
import type { Command, Control } from '../../../shared/types.js';
import type { CallRow, EngineRow } from '../views.js';

export type Decision =
  | { refuse: ErrorCode; message: string }
  | { server: 'hangup' | 'decline' | 'availability' }
  /** a hangup or decline of the agent's call that ended meanwhile: done, nothing left to do */
  | { ended: true }
  | { engine: true };

/** An incoming call that ended while it rang, unanswered (the caller gave up, or nobody answered in time). */
const endedRing = (call: CallRow) => call.direction === 'inbound' && call.answered_at === null;

const liveEngine = (engine: EngineRow | null) => engine !== null && (engine.state === 'enabling' || engine.state === 'ready');

/**
 * In-call controls follow the agent's current policy, as the widget shows them (WidgetState.policy):
 * the spec freezes number visibility, the duration cap and the rate into a call, not its controls,
 * and an operator who turns DTMF or mute off means it at once. Judged on the call's frozen copy,
 * a control switched mid-call was offered by the widget and refused here, or the reverse.
 */
export function decideCommand(command: Command, named: CallRow | null, engine: EngineRow | null, controls: Control[]): Decision {
  // A call the command names may have ended as the agent clicked (the caller gave up, the far end
  // hung up): ending it is done, as POST /calls/{id}/hangup answers for an ended call. A decline
  // only of a ring that ended unanswered: a call that was answered or placed was never the agent's
  // to decline. Everything else finds no call to act on.
  if (named?.ended_at != null && (command.kind === 'hangup' || (command.kind === 'decline' && endedRing(named)))) return { ended: true };
  const call = named?.ended_at == null ? named : null;
  const needsControl = (control: Control): Decision | null =>
    controls.includes(control) ? null : { refuse: 'control_not_allowed', message: `The policy does not enable ${control}.` };
  const needsWindow = (): Decision | null =>
    liveEngine(engine) ? null : { refuse: 'invalid_state', message: 'The agent has no live call window.' };
  const needsConnected = (): Decision | null =>
    call?.status === 'connected' ? null : { refuse: 'invalid_state', message: 'There is no connected call.' };

  switch (command.kind) {
    case 'hangup':
      return call ? { server: 'hangup' } : { refuse: 'invalid_state', message: 'There is no call to hang up.' };
    case 'decline':
      return call?.status === 'incoming' ? { server: 'decline' } : { refuse: 'invalid_state', message: 'There is no incoming call to decline.' };
    case 'answer':
      if (call?.status !== 'incoming') return { refuse: 'invalid_state', message: 'There is no incoming call to answer.' };
      return needsWindow() ?? { engine: true };
    case 'mute':
      return needsControl('mute') ?? needsConnected() ?? needsWindow() ?? { engine: true };
    case 'unmute':
      // never refused for the policy: an agent muted before an operator took mute away would stay
      // muted, unheard, for the rest of the call
      return needsConnected() ?? needsWindow() ?? { engine: true };
    case 'dtmf':
      if (!command.digits) return { refuse: 'invalid_request', message: 'A dtmf command needs digits.' };
      return needsControl('dtmf') ?? needsConnected() ?? needsWindow() ?? { engine: true };
    case 'availability':
      if (command.available === undefined) return { refuse: 'invalid_request', message: 'An availability command needs available (boolean).' };
      return engine && engine.state !== 'closed' ? { server: 'availability' } : { refuse: 'invalid_state', message: 'The agent has no call window.' };
    case 'focus':
      return needsWindow() ?? { engine: true };
  }
}
