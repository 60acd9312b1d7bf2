/** Every text a user of the call window can see, in one place. */
import type { CallStatus } from '../../shared/types.js';

export const MESSAGES = {
  keepOpen: 'Keep this window open during calls.',
  noTicket: 'Open the call window again from the widget.',
  ticketInvalid: 'This call window link has expired or was already used. Open the call window again from the widget.',
  agentBusy: 'Your other call window is on a call, so this one cannot take over yet. Finish that call, then click Try again.',
  unreachable: 'The click-to-call service could not be reached. Check your connection, then click Try again.',
  bootFailed: 'This page cannot start the call window. Open the call window again from the widget.',
  replaced: 'This call window was replaced by a newer one. You can close it.',
  unauthorized: 'This call window is no longer signed in. Open the call window again from the widget.',
  platformDisabled: 'Calling is switched off on this service right now.',
  integrationDisabled: 'Calling is switched off for this integration.',
  agentDisabled: 'Calls are not enabled for you on this integration.',
  micAsking: 'Allow the microphone when the browser asks, so you can talk on calls.',
  micDenied: 'Microphone access is blocked. Allow the microphone for this site in your browser (the icon in the address bar), then click Try again.',
  micMissing: 'No microphone was found. Connect one, then click Try again.',
  micBusy: 'The microphone is in use by another application. Free it, then click Try again.',
  micUnsupported: 'This browser cannot use a microphone on this page.',
  voiceUnavailable: 'The voice service is not available right now; retrying.',
  voiceScriptFailed: 'The voice component could not be loaded. Reload this window to try again.',
  reconnecting: 'Connection to the service lost; retrying.',
  hangupUncertain: 'The voice provider could not be reached, so the call may still be up. Click Hang up again.',
  hangupFailed: 'The call could not be hung up. Try again.',
  connectFailed: 'The call could not be connected.',
} as const;

/** What the window's state element says. */
export const STATE_LABELS = {
  pairing: 'Connecting…',
  enabling: 'Waiting for the microphone…',
  no_mic: 'No microphone',
  ready: 'Ready for calls',
  call: 'On a call',
  closed: 'Closed',
  error: 'Not connected',
} as const;

export type WindowState = keyof typeof STATE_LABELS;

/** The call status element's text: the server's status, or `ended` once the window lost sight of it. */
export const CALL_STATUS_LABELS: Record<CallStatus | 'ended', string> = {
  queued: 'Starting…',
  claimed: 'Connecting…',
  dialing: 'Dialing…',
  ringing: 'Ringing…',
  connected: 'Connected',
  incoming: 'Incoming call',
  completed: 'Call ended',
  rejected: 'Declined',
  busy: 'Busy',
  no_answer: 'No answer',
  canceled: 'Canceled',
  failed: 'Call failed',
  expired: 'Not picked up in time',
  ended: 'Call ended',
};
