/**
 * What each widget command does in the window (api/domain/commands/decide.ts sends answer, mute,
 * unmute, dtmf and focus here; hangup, decline and availability are the server's, handled here
 * only defensively). A throw becomes a `failed` ack with its text.
 */
import type { EngineCommand } from './api.js';
import type { VoiceDriver } from './drivers/types.js';

export interface CommandTarget {
  driver: VoiceDriver | null;
  focus(): void;
  setMuted(muted: boolean): void;
  /** the window answered this call: it holds it from now on */
  answered(callId: string | null): void;
}

/**
 * The commands after which the window heartbeats at once: their effect is what a heartbeat reports
 * (the mute state, the call the device holds) or learns (the call, once the server applied an
 * answer). focus and dtmf change neither; their result goes back on the socket ack alone.
 */
export const REPORTED_KINDS: ReadonlySet<EngineCommand['kind']> = new Set(['answer', 'decline', 'hangup', 'mute', 'unmute']);

export async function carryOut(command: EngineCommand, target: CommandTarget): Promise<void> {
  if (command.kind === 'focus') return target.focus();
  if (command.kind === 'availability') return; // the server's own setting
  const driver = target.driver;
  if (!driver?.ready) throw new Error('The voice device is not ready.');
  switch (command.kind) {
    case 'answer':
      await driver.accept();
      return target.answered(command.call_id);
    case 'mute':
    case 'unmute':
      driver.mute(command.kind === 'mute');
      return target.setMuted(command.kind === 'mute');
    case 'dtmf':
      if (!command.digits) throw new Error('A dtmf command needs digits.');
      return driver.sendDigits(command.digits);
    case 'hangup':
      return driver.disconnect();
    case 'decline':
      return driver.reject();
  }
}
