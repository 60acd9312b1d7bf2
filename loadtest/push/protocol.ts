/** Messages between npm run bench:push and its client workers (IPC, structured clone). */

/**
 * What a client socket is: a widget or an engine of our gateway (socket.io-client with a token and
 * an Origin), a plain socket.io-client (the Socket.IO baseline), or a plain WebSocket (raw uWS).
 */
export type ClientKind = 'widget' | 'engine' | 'sio' | 'uws';

export interface Target {
  kind: ClientKind;
  url: string;
  /** which agent (index in the bench's list), to match snapshots with the store */
  agent: number;
  token?: string;
  origin?: string;
}

export type WorkerRequest =
  | { op: 'open'; id: number; targets: Target[]; inflight: number; timeoutMs: number }
  | { op: 'heartbeats'; id: number; periodMs: number }
  | { op: 'load'; id: number; rate: number; warmupS: number; seconds: number; tag: string }
  | { op: 'counts'; id: number }
  | { op: 'reset'; id: number }
  | { op: 'records'; id: number }
  | { op: 'close'; id: number; keep?: boolean }
  | { op: 'reconnect'; id: number; inflight: number; timeoutMs: number }
  | { op: 'snapshots'; id: number };

export interface OpenResult {
  opened: number;
  failed: number;
  retries: number;
  errors: Record<string, number>;
  /** time from the request to the last socket with its first snapshot */
  ms: number;
}

export interface Counts {
  sockets: number;
  connected: number;
  /** widget commands emitted, answered ok, answered with an error (or timed out) */
  sent: number;
  replied: number;
  reply_errors: Record<string, number>;
  /** commands seen by engines (first time each), and commands whose ack was answered ok (each once) */
  delivered: number;
  delivered_by_heartbeat: number;
  acked: number;
  ack_errors: number;
  heartbeats: number;
  heartbeats_answered: number;
  heartbeat_errors: number;
  /** `state` events (widgets, Socket.IO baseline) or messages (raw uWS) received */
  states: number;
  works: number;
  disconnects: number;
  ended: Record<string, number>;
}

/**
 * [command_id from the answer (0 without one), send time, answer time, answered ok (1|0), measured (1|0), request_id];
 * times in ms since the epoch, sub-ms. The bench also maps request_id → command_id through the store,
 * so a command whose answer came late (or never) is still matched with its delivery.
 */
export type SendRecord = [number, number, number, number, number, string];
/** [command_id, receive time, via heartbeat (1|0)] */
export type ReceiveRecord = [number, number, number];

export interface Records {
  sends: SendRecord[];
  receives: ReceiveRecord[];
}

export interface Snapshot {
  kind: ClientKind;
  agent: number;
  /** got its snapshot since the last (re)connect: state for widgets, work for engines */
  fresh: boolean;
  /** widgets: the newest WidgetState version received */
  version: number;
}

export type WorkerReply = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };
