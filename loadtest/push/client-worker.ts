/**
 * A client process of npm run bench:push (forked by the bench, several at once). It holds its
 * share of the sockets — widgets and engines of our gateway, plain Socket.IO clients, plain
 * WebSockets for raw uWS — and does what the bench asks over IPC: open them with a bounded number
 * in flight, send widget commands at a rate (each with a fresh request_id carrying the moment it was due),
 * record when engines first see each command and ack it at once, heartbeat like a call window,
 * count pushes, close, and reconnect after a restart. It exits when the bench goes away.
 */
import { io } from 'socket.io-client';
import WebSocket from 'ws';
import { WireSocket } from './wire-client.js';
import type { ClientKind, Counts, OpenResult, Records, ReceiveRecord, SendRecord, Snapshot, Target, WorkerReply, WorkerRequest } from './protocol.js';

const WORKER = Number(process.env.BENCH_WORKER ?? 0);
/** which Socket.IO client the sockets use: the lean wire client (default) or socket.io-client */
const CLIENT = process.env.BENCH_CLIENT === 'socket.io-client' ? 'socket.io-client' : 'wire';
/** how long a widget waits for a command's answer (an overloaded server answers late, not never) */
const ANSWER_TIMEOUT_MS = 180_000;
const now = () => performance.timeOrigin + performance.now();

/** What the bench uses of a Socket.IO client socket: socket.io-client's Socket and WireSocket both offer it. */
type SioSocket = Pick<WireSocket, 'connected' | 'on' | 'connect' | 'disconnect' | 'timeout' | 'removeAllListeners'>;

interface Conn {
  target: Target;
  sio?: SioSocket;
  ws?: WebSocket;
  connected: boolean;
  fresh: boolean;
  version: number;
  /** the pending open/reconnect of this socket */
  waiter?: { resolve: () => void; fail: (code: string, retry: boolean) => void };
  nextHeartbeat: number;
}

const conns: Conn[] = [];
const blank = (): Counts => ({
  sockets: 0,
  connected: 0,
  sent: 0,
  replied: 0,
  reply_errors: {},
  delivered: 0,
  delivered_by_heartbeat: 0,
  acked: 0,
  ack_errors: 0,
  heartbeats: 0,
  heartbeats_answered: 0,
  heartbeat_errors: 0,
  states: 0,
  works: 0,
  disconnects: 0,
  ended: {},
});
let counts = blank();
let sends: SendRecord[] = [];
let receives: ReceiveRecord[] = [];
const seen = new Set<number>();
const acked = new Set<number>();
const bump = (map: Record<string, number>, key: string) => void (map[key] = (map[key] ?? 0) + 1);

/** An engine got commands (by push or in a heartbeat answer): note the first sight of each, ack them. */
function onCommands(conn: Conn, commands: Array<{ command_id: number }>, viaHeartbeat: boolean): void {
  const at = now();
  const acks: Array<{ command_id: number; result: 'done' }> = [];
  for (const command of commands) {
    acks.push({ command_id: command.command_id, result: 'done' });
    if (seen.has(command.command_id)) continue;
    seen.add(command.command_id);
    receives.push([command.command_id, at, viaHeartbeat ? 1 : 0]);
    counts.delivered += 1;
    if (viaHeartbeat) counts.delivered_by_heartbeat += 1;
  }
  // the ack event takes at most 100 results (a backlog can hand over more at once)
  for (let from = 0; conn.sio && from < acks.length; from += 100) {
    const batch = acks.slice(from, from + 100);
    conn.sio.timeout(ANSWER_TIMEOUT_MS).emit('ack', batch, (error: unknown, reply: { ok?: boolean } | undefined) => {
      if (error || !reply?.ok) {
        counts.ack_errors += batch.length;
        return;
      }
      // an engine acks every command it is handed, again when handed again: count each command once
      for (const ack of batch) {
        if (acked.has(ack.command_id)) continue;
        acked.add(ack.command_id);
        counts.acked += 1;
      }
    });
  }
}

function heartbeat(conn: Conn): void {
  if (!conn.sio?.connected) return;
  counts.heartbeats += 1;
  conn.sio
    .timeout(ANSWER_TIMEOUT_MS)
    .emit('heartbeat', { state: 'ready', mic_ready: true, call_id: null }, (error: unknown, reply: { ok?: boolean; commands?: Array<{ command_id: number }> } | undefined) => {
      if (error || !reply?.ok) {
        counts.heartbeat_errors += 1;
        return;
      }
      counts.heartbeats_answered += 1;
      if (reply.commands?.length) onCommands(conn, reply.commands, true);
    });
}

function gotSnapshot(conn: Conn): void {
  conn.fresh = true;
  const waiter = conn.waiter;
  conn.waiter = undefined;
  waiter?.resolve();
}

function refused(conn: Conn, code: string, retry: boolean): void {
  const waiter = conn.waiter;
  conn.waiter = undefined;
  waiter?.fail(code, retry);
}

function newSocket(target: Target): SioSocket {
  const auth = target.token ? { auth: { token: target.token } } : {};
  if (CLIENT === 'wire') return new WireSocket(target.url, { ...auth, origin: target.origin, timeoutMs: 60_000 });
  return io(target.url, {
    path: '/socket.io',
    transports: ['websocket'],
    reconnection: false,
    forceNew: true,
    autoConnect: false,
    timeout: 60_000,
    ...auth,
    ...(target.origin ? { extraHeaders: { origin: target.origin } } : {}),
  }) as unknown as SioSocket;
}

function createSio(conn: Conn): SioSocket {
  const { target } = conn;
  const socket = newSocket(target);
  socket.on('connect', () => {
    conn.connected = true;
    if (target.kind === 'sio') gotSnapshot(conn);
  });
  socket.on('disconnect', () => {
    if (conn.connected) counts.disconnects += 1;
    conn.connected = false;
    conn.fresh = false;
    // a socket that drops before its snapshot is a failed attempt (retried)
    refused(conn, 'disconnected_before_snapshot', true);
  });
  socket.on('connect_error', (error: Error & { data?: { code?: string; final?: boolean } }) => {
    const code = error.data?.code ?? error.message ?? 'connect_error';
    refused(conn, code, error.data?.final !== true);
  });
  socket.on('ended', (end: { code?: string }) => bump(counts.ended, end?.code ?? 'unknown'));
  socket.on('state', (state: { version?: number }) => {
    counts.states += 1;
    if (typeof state?.version === 'number' && state.version > conn.version) conn.version = state.version;
    if (target.kind === 'widget') gotSnapshot(conn);
  });
  if (target.kind === 'engine') {
    socket.on('work', (work: { commands?: Array<{ command_id: number }> }) => {
      counts.works += 1;
      if (work?.commands?.length) onCommands(conn, work.commands, false);
      gotSnapshot(conn);
    });
  }
  return socket;
}

function openWs(conn: Conn): void {
  const ws = new WebSocket(conn.target.url, { perMessageDeflate: false });
  conn.ws = ws;
  const current = () => conn.ws === ws;
  ws.on('open', () => {
    if (!current()) return;
    conn.connected = true;
    gotSnapshot(conn);
  });
  // Decode like socket.io-client does (Engine.IO '4', Socket.IO '2', JSON), so every server's
  // clients do the same work per message and read their sockets at the same pace.
  ws.on('message', (data: WebSocket.RawData) => {
    const text = data.toString();
    if (text.startsWith('42')) JSON.parse(text.slice(2));
    counts.states += 1;
  });
  ws.on('error', (error: Error) => current() && refused(conn, (error as NodeJS.ErrnoException).code ?? error.message, true));
  ws.on('close', () => {
    if (!current()) return;
    if (conn.connected) counts.disconnects += 1;
    conn.connected = false;
    conn.fresh = false;
    refused(conn, 'closed_before_open', true);
  });
}

/** One attempt to (re)connect a socket until its snapshot arrives. */
function attempt(conn: Conn): Promise<void> {
  return new Promise((resolve, reject) => {
    conn.fresh = false;
    // the version this attempt's snapshot brings, not the highest one seen before it (part d checks it against the store)
    conn.version = 0;
    conn.waiter = { resolve, fail: (code, retry) => reject(Object.assign(new Error(code), { retry })) };
    if (conn.target.kind === 'uws') openWs(conn);
    else {
      conn.sio ??= createSio(conn);
      conn.sio.connect();
    }
  });
}

/** Opens (or reopens) sockets with at most `inflight` attempts at once; retries retryable failures. */
async function openAll(list: Conn[], inflight: number, timeoutMs: number): Promise<OpenResult> {
  const started = now();
  const deadline = started + timeoutMs;
  const result: OpenResult = { opened: 0, failed: 0, retries: 0, errors: {}, ms: 0 };
  let next = 0;
  const lane = async () => {
    while (next < list.length) {
      const conn = list[next++]!;
      for (let tries = 0; ; tries += 1) {
        try {
          await attempt(conn);
          result.opened += 1;
          break;
        } catch (error) {
          bump(result.errors, (error as Error).message);
          const retry = (error as { retry?: boolean }).retry === true;
          if (!retry || now() > deadline) {
            result.failed += 1;
            break;
          }
          result.retries += 1;
          if (conn.sio) conn.sio.disconnect();
          conn.ws?.terminate();
          await new Promise((r) => setTimeout(r, 50 + Math.random() * Math.min(1000, 50 * 2 ** tries)));
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(inflight, list.length)) }, lane));
  result.ms = now() - started;
  return result;
}

/** Sends focus commands from this worker's widgets at `rate` per second, round robin. */
function load(rate: number, warmupS: number, seconds: number, tag: string): Promise<{ sent: number; ms: number }> {
  const widgets = conns.filter((conn) => conn.target.kind === 'widget' && conn.sio?.connected);
  if (widgets.length === 0 || rate <= 0) return Promise.resolve({ sent: 0, ms: 0 });
  const start = now();
  const total = Math.round(rate * (warmupS + seconds));
  const measuredFrom = Math.round(rate * warmupS);
  let sent = 0;
  let turn = Math.floor(Math.random() * widgets.length);
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((now() - start) / 1000) * rate));
      while (sent < due) {
        const conn = widgets[turn++ % widgets.length]!;
        const measured = sent >= measuredFrom ? 1 : 0;
        // Timed from when the command was due, not when this timer got to send it: a client held up
        // by a saturated machine sends its backlog late, and timing from then would leave that wait
        // out (coordinated omission), the more so the busier the machine.
        // (command k, counted from 0, is due once (k + 1) commands are: at start + (k + 1) / rate)
        const sendTs = start + ((sent + 1) * 1000) / rate;
        sent += 1;
        counts.sent += 1;
        // the send time (µs since the epoch) travels in the request_id, so the store holds it too
        const requestId = `bench-${tag}-${WORKER}-${sent}-${Math.round(sendTs * 1000)}`;
        const record: SendRecord = [0, sendTs, 0, 0, measured, requestId];
        sends.push(record);
        conn.sio!.timeout(ANSWER_TIMEOUT_MS).emit('command', { kind: 'focus', request_id: requestId }, (error: unknown, reply: { ok?: boolean; command_id?: number; error?: string } | undefined) => {
          record[2] = now();
          if (!error && reply?.ok && typeof reply.command_id === 'number') {
            record[0] = reply.command_id;
            record[3] = 1;
            counts.replied += 1;
          } else {
            bump(counts.reply_errors, error ? 'timeout' : (reply?.error ?? 'unknown'));
          }
        });
      }
      if (sent >= total) {
        clearInterval(timer);
        resolve({ sent, ms: now() - start });
      }
    }, 2);
  });
}

let heartbeatTimer: NodeJS.Timeout | undefined;
function startHeartbeats(periodMs: number): void {
  if (heartbeatTimer) clearInterval(heartbeatTimer);
  if (periodMs <= 0) return;
  const engines = conns.filter((conn) => conn.target.kind === 'engine');
  for (const conn of engines) conn.nextHeartbeat = now() + Math.random() * periodMs;
  heartbeatTimer = setInterval(() => {
    const at = now();
    for (const conn of engines) {
      if (conn.nextHeartbeat <= at) {
        conn.nextHeartbeat = at + periodMs;
        heartbeat(conn);
      }
    }
  }, 50);
}

/** Closes every socket; with `keep`, the sockets stay known (and their heartbeats scheduled) for a later reconnect. */
async function closeAll(keep = false): Promise<number> {
  if (!keep && heartbeatTimer) clearInterval(heartbeatTimer);
  if (!keep) heartbeatTimer = undefined;
  const closing = conns.map(
    (conn) =>
      new Promise<void>((resolve) => {
        const ws = conn.ws;
        if (ws) {
          if (ws.readyState === WebSocket.CLOSED) return resolve();
          const timer = setTimeout(() => (ws.terminate(), resolve()), 5000);
          ws.once('close', () => (clearTimeout(timer), resolve()));
          ws.close();
          return;
        }
        conn.sio?.disconnect();
        if (!keep) conn.sio?.removeAllListeners();
        resolve();
      }),
  );
  await Promise.all(closing);
  const closed = conns.length;
  if (!keep) conns.length = 0;
  return closed;
}

async function handle(request: WorkerRequest): Promise<unknown> {
  switch (request.op) {
    case 'open': {
      const fresh = request.targets.map((target): Conn => ({ target, connected: false, fresh: false, version: 0, nextHeartbeat: 0 }));
      conns.push(...fresh);
      return openAll(fresh, request.inflight, request.timeoutMs);
    }
    case 'heartbeats': {
      // A call window reports ready at once, then every period.
      for (const conn of conns) if (conn.target.kind === 'engine') heartbeat(conn);
      startHeartbeats(request.periodMs);
      return { engines: conns.filter((conn) => conn.target.kind === 'engine').length };
    }
    case 'load':
      return load(request.rate, request.warmupS, request.seconds, request.tag);
    case 'counts':
      return { ...counts, sockets: conns.length, connected: conns.filter((conn) => conn.connected).length } satisfies Counts;
    case 'reset':
      counts = blank();
      sends = [];
      receives = [];
      return null;
    case 'records': {
      const records: Records = { sends, receives };
      return records;
    }
    case 'close':
      return { closed: await closeAll(request.keep) };
    case 'reconnect':
      return openAll(conns, request.inflight, request.timeoutMs);
    case 'snapshots':
      return conns.map((conn): Snapshot => ({ kind: conn.target.kind as ClientKind, agent: conn.target.agent, fresh: conn.fresh, version: conn.version }));
  }
}

process.on('message', (message: unknown) => {
  const request = message as WorkerRequest;
  handle(request).then(
    (result) => process.send?.({ id: request.id, ok: true, result } satisfies WorkerReply),
    (error: unknown) => process.send?.({ id: request.id, ok: false, error: (error as Error).stack ?? String(error) } satisfies WorkerReply),
  );
});
process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => process.exit(0));
