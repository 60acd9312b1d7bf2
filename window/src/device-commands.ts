/**
 * What each widget command does in the window (api/domain/commands/decide.ts sends answer, mute,
 * unmute, dtmf and focus here; hangup, decline and availability are the server's, handled here
 * only defensively). A throw becomes a `failed` ack with its text.
 */
import type { EngineCommand } from './api.js';
import type { VoiceDriver } from './drivers/types.js';
import { MESSAGES } from './messages.js';

export interface CommandTarget {
  driver: VoiceDriver | null;
  /** the call this window holds (or answered), which mute, unmute and dtmf act on */
  heldCallId: string | null;
  /** the call the device says rings on it, when it said (before the window has heard of the call) */
  ringingCallId: string | null;
  focus(): void;
  setMuted(muted: boolean): void;
  /** the incoming call the device took, or is taking (the window's Answer button): an answer for it is done */
  takenHere: string | null;
  /** the device is taking this call (its answer may wait for the ring), or, with null, failed to */
  taking(callId: string | null): void;
  /** the window answered this call: it holds it from now on */
  answered(callId: string | null): void;
  /** the device let its ringing leg go (hangup, decline): the driver says nothing of a leg it was told to let go */
  letGoRinging(): void;
}

/**
 * The commands after which the window heartbeats at once: their effect is what a heartbeat reports
 * (the mute state, the call the device holds) or learns (the call, once the server applied an
 * answer). focus and dtmf change neither; their result goes back on the socket ack alone.
 */
export const REPORTED_KINDS: ReadonlySet<EngineCommand['kind']> = new Set(['answer', 'decline', 'hangup', 'mute', 'unmute']);

/** The commands that act on the call the device holds, whichever it is: only with that call up here. */
const ON_THE_HELD_CALL: ReadonlySet<EngineCommand['kind']> = new Set(['mute', 'unmute', 'dtmf']);
/** The commands that act on the call ringing on the device, whichever it is. */
const ON_THE_RINGING_CALL: ReadonlySet<EngineCommand['kind']> = new Set(['answer', 'decline']);

export async function carryOut(command: EngineCommand, target: CommandTarget): Promise<void> {
  if (command.kind === 'focus') return target.focus();
  if (command.kind === 'availability') return; // the server's own setting
  const driver = target.driver;
  if (!driver?.ready) throw new Error(MESSAGES.deviceNotReady);
  // The device acts on the call it holds or that rings on it, whichever that is. A command for
  // another one (queued near the end of a call and handed over again after a gap, when the next
  // call is up) must not mute it, send it digits or answer it; one for a call no longer up here
  // must not leave the next call muted. An answer may come before the window has heard its call
  // ring (nothing held yet): the device answers what rings, unless the device named another call.
  const held = target.heldCallId;
  if (command.call_id !== null && command.call_id !== held) {
    if (ON_THE_HELD_CALL.has(command.kind)) throw new Error(held === null ? MESSAGES.callOver : MESSAGES.otherCall);
    const ringing = held ?? target.ringingCallId;
    if (ON_THE_RINGING_CALL.has(command.kind) && ringing !== null && command.call_id !== ringing) throw new Error(MESSAGES.otherCall);
  }
  switch (command.kind) {
    case 'answer':
      if (command.call_id !== null && command.call_id === target.takenHere) return;
      target.taking(command.call_id);
      try {
        await driver.accept(command.call_id);
      } catch (error) {
        target.taking(null);
        throw error;
      }
      return target.answered(command.call_id);
    case 'mute':
    case 'unmute':
      driver.mute(command.kind === 'mute');
      return target.setMuted(command.kind === 'mute');
    case 'dtmf':
      if (!command.digits) throw new Error(MESSAGES.dtmfNoDigits);
      return driver.sendDigits(command.digits);
    case 'hangup':
      driver.disconnect();
      return target.letGoRinging();
    case 'decline':
      driver.reject();
      return target.letGoRinging();
  }
}
