/**
 * What the window shows, derived from the engine's state in one pure function: the window state,
 * the call card (a call the window lost sight of shows as ended, its timer frozen), and the one
 * message that matters most (final end, call problem, microphone, voice, connection).
 */
import type { Paired } from './api.js';
import type { HeldCall } from './call-state.js';
import { MESSAGES, UI_TEXTS } from './messages.js';
import type { MicState } from './mic.js';
import { elapsedSeconds } from './timer.js';
import type { ViewModel } from './ui.js';

export interface Problems {
  /** why the engine stopped for good */
  final: string | null;
  /** the last hang-up, mute or connect failed */
  call: string | null;
  /** the voice token or device */
  voice: string | null;
  /** the last heartbeat failed */
  connection: boolean;
}

export interface EngineSnapshot {
  paired: Paired;
  /** the agent's in-call controls now (the pairing's policy may be older) */
  controls: Paired['policy']['controls'];
  stopped: boolean;
  held: HeldCall | null;
  /** the call id reported in heartbeats */
  reportId: string | null;
  mic: MicState;
  ready: boolean;
  muted: boolean;
  hangupBusy: boolean;
  answerBusy: boolean;
  /** the incoming call the device took already: no Answer for it */
  takenHere: string | null;
  problems: Problems;
  /** null when the window has no socket */
  socketUp: boolean | null;
}

export function micProblem(mic: MicState): string | null {
  const problems: Partial<Record<MicState, string>> = { denied: MESSAGES.micDenied, missing: MESSAGES.micMissing, busy: MESSAGES.micBusy, unsupported: MESSAGES.micUnsupported };
  return problems[mic] ?? null;
}

function message(s: EngineSnapshot): ViewModel['message'] {
  const p = s.problems;
  if (p.final) return { text: p.final, tone: 'error' };
  const mic = micProblem(s.mic);
  // both: a call that failed for want of the microphone says so, and what to do about it
  if (p.call) return { text: mic ? `${p.call} ${mic}` : p.call, tone: 'error' };
  if (mic) return { text: mic, tone: 'error' };
  if (s.mic === 'asking') return { text: MESSAGES.micAsking, tone: 'info' };
  if (p.voice) return { text: p.voice, tone: 'warn' };
  if (p.connection) return { text: MESSAGES.reconnecting, tone: 'warn' };
  return null;
}

function callCard(held: HeldCall | null): ViewModel['call'] {
  if (!held) return null;
  const lost = held.lostAt !== null;
  const frozen = lost ? elapsedSeconds(held.call, held.receivedAt, held.lostAt!) : null;
  return {
    direction: held.call.direction,
    status: lost ? 'ended' : held.call.status,
    display: held.call.display,
    timing: frozen === null ? held.call : { ...held.call, ended_at: held.call.server_time, duration: frozen },
    receivedAt: held.receivedAt,
    live: !held.ended,
  };
}

export function viewModel(s: EngineSnapshot): ViewModel {
  const state = s.stopped ? 'closed' : s.reportId ? 'call' : micProblem(s.mic) ? 'no_mic' : s.ready ? 'ready' : 'enabling';
  return {
    state,
    agent: s.paired.agent.name,
    call: callCard(s.held),
    hangupBusy: s.hangupBusy,
    answerBusy: s.answerBusy,
    answerable: !!s.held && !s.held.ended && s.held.lostAt === null && s.held.call.direction === 'inbound' && s.held.call.status === 'incoming' && s.takenHere !== s.held.call.call_id,
    // Unmute stays while muted, whatever the policy now says (an agent is never left unheard)
    muteAllowed: s.controls.includes('mute') || s.muted,
    muted: s.muted,
    message: message(s),
    retry: !s.stopped && micProblem(s.mic) ? UI_TEXTS.tryAgain : null,
    consent: null,
    connection: s.stopped || s.socketUp === null ? null : s.socketUp ? 'live' : 'polling',
    voiceStarting: state === 'enabling' && s.mic === 'ready',
  };
}
