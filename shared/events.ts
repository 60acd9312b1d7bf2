/**
 * The Socket.IO contract between the gateway and its clients, typed once for both ends (the
 * gateway, the SDK and the call window). Clients authenticate with `auth: {token}` in the
 * handshake; widget tokens from their own origin, engine tokens from the service's own pages
 * or an allowed extension.
 */
import type { ErrorCode, ErrorEnvelope } from './errors.js';
import type { DialRequest, EngineCommand, HeartbeatRequest, HeartbeatResponse } from './schemas/engine-api.js';
import type { Command, CommandResult, WidgetState } from './types.js';

/**
 * A pushed WidgetState. It is the agent's, shared by all the agent's widgets, so the
 * session-specific session_expires_at is present only in the snapshot sent on (re)connect; a
 * client keeps the value it has when a push lacks it. Never apply a version older than yours.
 */
export type PushedState = Omit<WidgetState, 'session_expires_at'> & { session_expires_at?: number };

/** Why the server ended a connection. `final`: do not reconnect with this credential. */
export interface SocketEnd {
  code: ErrorCode | 'token_expired' | 'server_restarting' | 'replaced';
  final: boolean;
  message: string;
  /** with rate_limited: seconds before a new attempt can succeed (REST's Retry-After) */
  retry_after?: number;
}

/** connect_error data when the handshake is refused. */
export type ConnectRefusal = SocketEnd;

/** Commands and dial requests for an engine; ack each command with the `ack` event. */
export interface EngineWork {
  commands: EngineCommand[];
  dial_requests: DialRequest[];
}

/**
 * A refused socket request: the REST body, and with it what REST sends as Retry-After
 * (rate_limited, service_unavailable), in seconds.
 */
export type SocketRefusal = ErrorEnvelope & { retry_after?: number };

/**
 * How long a refusal asks a client to wait, in ms: its `retry_after`, or REST's Retry-After header
 * (both seconds). 0 when it gives none, or anything but a positive number.
 */
export function retryAfterMs(seconds: unknown): number {
  const value = typeof seconds === 'string' && seconds.trim() !== '' ? Number(seconds) : seconds;
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value * 1000 : 0;
}

export type Reply<T> = (result: T | SocketRefusal) => void;

export interface WidgetServerEvents {
  state: (state: PushedState) => void;
  ended: (end: SocketEnd) => void;
}

export interface WidgetClientEvents {
  /** the same as POST /widget/commands, answered through the ack callback */
  command: (command: Command, reply: Reply<CommandResult>) => void;
}

export interface EngineServerEvents {
  work: (work: EngineWork) => void;
  ended: (end: SocketEnd) => void;
}

export interface EngineClientEvents {
  /** the same as POST /engine/heartbeat */
  heartbeat: (report: HeartbeatRequest, reply: Reply<HeartbeatResponse>) => void;
  /** results of commands received by push: [{command_id, result}] */
  ack: (acks: HeartbeatRequest['acks'], reply?: Reply<{ ok: true }>) => void;
}

/** The Socket.IO path on the gateway. */
export const SOCKET_PATH = '/socket.io';

/**
 * The gateway pings every connection this often and closes one whose pong has not come this long
 * after; a client closes its side when no ping came for both together. A connection that died
 * without a word (a laptop changed networks, a NAT forgot it) so goes within 20 s, not Socket.IO's
 * 45 s: until then its widget shows nothing new (it polls only while its socket is down) and its
 * window gets no pushes. The cost: a ping and a pong per connection every 10 s.
 */
export const SOCKET_PING_INTERVAL_MS = 10_000;
export const SOCKET_PING_TIMEOUT_MS = 10_000;

/**
 * A client whose request on the socket went unanswered takes the connection for dead only if it
 * has heard nothing on it (not even a ping) for this long: a live connection carries a ping every
 * SOCKET_PING_INTERVAL_MS, so a slow server, which still pings, never has its sockets closed (and
 * reopened, adding to its load). The request itself goes over REST at once either way.
 */
export const SOCKET_SILENT_MS = SOCKET_PING_INTERVAL_MS + 2500;

/** Window messages (the spec's window message nudge) make the widget poll, or the window heartbeat, at most this often. */
export const NUDGE_MIN_MS = 1000;
