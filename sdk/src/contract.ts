/**
 * The resources the SDK reads and sends (spec section 2, shared/schemas), written as plain
 * interfaces so the SDK's type declarations stand alone (no zod). test/sdk/contract-types.test.ts
 * checks both ways that they match the shared schemas, so they cannot drift.
 */
export type CallStatus =
  | 'queued'
  | 'claimed'
  | 'dialing'
  | 'ringing'
  | 'connected'
  | 'completed'
  | 'rejected'
  | 'busy'
  | 'no_answer'
  | 'canceled'
  | 'failed'
  | 'expired'
  | 'incoming';

export interface Display {
  name: string | null;
  company: string | null;
  /** null when the policy hides numbers; already masked by the server when it masks them */
  number: string | null;
  contact_reference: string | null;
  department: string | null;
}

export interface Call {
  ok?: true;
  request_id: string;
  call_id: string;
  direction: 'outbound' | 'inbound';
  status: CallStatus;
  error: string | null;
  display: Display;
  answered_at: number | null;
  ended_at: number | null;
  duration: number;
  expires_at: number;
  server_time: number;
  orphaned: boolean;
}

export interface Engine {
  id: string;
  state: 'enabling' | 'ready' | 'offline' | 'closed';
  live: boolean;
  available: boolean;
  mic_ready: boolean;
  busy: boolean;
  muted: boolean;
  simulated: boolean;
  last_seen_ago: number | null;
  version: number;
  client: 'window' | 'extension';
}

/** The integration setting "Call window opens as". */
export type WindowMode = 'popup' | 'tab' | 'frame-shell' | 'extension';

export interface Policy {
  outbound: boolean;
  inbound: boolean;
  number_visibility: 'show' | 'hide' | 'masked';
  controls: Array<'mute' | 'dtmf'>;
  widget: {
    position: 'bottom-right' | 'bottom-left' | 'top-right' | 'top-left';
    /** a language tag, or `page`: the page's `<html lang>` (a node of the release with migration 011 answers null for it) */
    language: string;
    window_mode: WindowMode;
  };
  max_call_seconds: number;
}

export interface WidgetAgent {
  name: string;
  identifier: string;
  type: 'email' | 'uuid';
  department: string | null;
}

export interface Realtime {
  url: string;
  path: string;
  available: boolean;
}

/** POST /sessions answer, forwarded unchanged by the integrator's sessionEndpoint. */
export interface Session {
  ok: true;
  widget_token: string;
  expires_at: number;
  agent: WidgetAgent;
  policy: Policy;
  engine: Engine | null;
  realtime: Realtime;
}

/**
 * What the integrator's sessionEndpoint answers: POST /sessions' Session forwarded unchanged, of
 * which the spec requires only widget_token and expires_at (a backend may trim the rest). The SDK
 * reads the other fields only as a first guess, until the first WidgetState.
 */
export type IntegratorSession = Pick<Session, 'widget_token' | 'expires_at'> & Partial<Omit<Session, 'widget_token' | 'expires_at'>>;

/** GET /widget/state; a pushed state may lack session_expires_at. */
export interface WidgetState {
  ok: true;
  engine: Engine | null;
  call: Call | null;
  policy: Policy;
  agent: WidgetAgent;
  version: number;
  server_time: number;
  poll_ms: number;
  session_expires_at?: number;
  realtime: Realtime;
  /** the newest command the call window could not carry out; the widget that sent it reports it */
  failed_command: FailedCommand | null;
}

export interface FailedCommand {
  request_id: string;
  kind: CommandKind;
  error: 'command_failed';
  message: string;
  failed_at: number;
}

export type CommandKind = 'hangup' | 'answer' | 'decline' | 'mute' | 'unmute' | 'dtmf' | 'availability' | 'focus';

export interface Command {
  kind: CommandKind;
  request_id: string;
  digits?: string;
  available?: boolean;
  ref?: string;
}

export interface CommandResult {
  ok: true;
  status: 'queued' | 'delivered' | 'done' | 'failed';
  command_id: number;
}

export interface LaunchTicket {
  ok: true;
  ticket: string;
  window_url: string;
  expires_in: number;
  window_name: string;
}

/** `ended` and connect_error data on the socket. */
export interface SocketEnd {
  code: string;
  final: boolean;
  message: string;
  /** with rate_limited: seconds before a new attempt can succeed */
  retry_after?: number;
}

export interface ErrorEnvelope {
  ok: false;
  error: string;
  message: string;
  /** socket answers only: seconds to wait, what REST sends as Retry-After */
  retry_after?: number;
}

/** Call statuses while the call is still going (the server's LIVE_STATUSES). */
export const LIVE_STATUSES: readonly CallStatus[] = ['queued', 'claimed', 'dialing', 'ringing', 'connected', 'incoming'];

export const isLive = (call: Call | null | undefined): call is Call => !!call && LIVE_STATUSES.includes(call.status);
