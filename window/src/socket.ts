/**
 * The engine's socket to the gateway (shared/events.ts): `work` pushes commands and dial requests,
 * `ended` says why the server closed the connection. Heartbeats and acks can go over it too. An
 * end marked final (replaced, unauthorized, platform_disabled) stops it for good; anything else
 * reconnects with full-jitter backoff, which this class keeps itself (socket.io-client's own
 * reconnection is off: it starts its backoff again on every close, so a socket dropped right after
 * each handshake would come back every second for ever). Pushes only accelerate: the heartbeat
 * carries the same work.
 */
import type { Socket } from 'socket.io-client';
import { statusOf } from '../../shared/error-statuses.js';
import { reconnectWait } from '../../shared/backoff.js';
import { SocketDoubt } from '../../shared/socket-doubt.js';
import { systemTimers } from '../../shared/timers.js';
import { retryAfterMs, type EngineClientEvents, type EngineServerEvents, type EngineWork, type SocketEnd, type SocketRefusal } from '../../shared/events.js';
import type { Realtime } from '../../shared/types.js';
import { ApiError, type CommandAck, type HeartbeatRequest, type HeartbeatResponse } from './api.js';

export type EngineSocketIo = Socket<EngineServerEvents, EngineClientEvents>;

/** socket.io-client's io(), injectable for tests. */
export type Connect = (
  url: string,
  options: { path: string; auth: { token: string }; reconnection: false; withCredentials: boolean; transports: Array<'websocket' | 'polling'>; tryAllTransports: boolean },
) => EngineSocketIo;

export interface SocketHandlers {
  onUp(): void;
  onDown(): void;
  onWork(work: EngineWork): void;
  /** a final end: the credential will never work again on this socket */
  onFinal(end: SocketEnd): void;
}

const REPLY_TIMEOUT_MS = 10_000;
/** The reconnect backoff: full jitter from a second, doubling to 30 s. */
const SOCKET_BACKOFF = { baseMs: 1000, capMs: 30_000 };
/**
 * A socket proves healthy by staying up this long (a server ping interval): only then does its
 * backoff start again from the base. One the server or a proxy drops right after the handshake
 * is reconnected ever more slowly instead.
 */
export const SOCKET_HEALTHY_MS = 10_000;

export class EngineSocket {
  readonly #socket: EngineSocketIo;
  readonly #handlers: SocketHandlers;
  readonly #random: () => number;
  #stopped = false;
  #attempt = 0;
  /** when the socket connected (ms); null while it is not */
  #upSince: number | null = null;
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** a retry ending's retry_after (ms), for the reconnect after the disconnect that follows it */
  #endWaitMs = 0;
  /** whether the socket, connected, still carries what it should (shared/socket-doubt.ts); in doubt, the engine heartbeats over REST */
  readonly #doubt: SocketDoubt<ReturnType<typeof setTimeout>>;

  constructor(connect: Connect, realtime: Realtime, token: string, handlers: SocketHandlers, random: () => number = Math.random) {
    this.#handlers = handlers;
    this.#random = random;
    // WebSocket first, as the SDK: a single connection needs no sticky session behind a proxy of
    // several gateways; long-polling (whose requests must all reach one node) only where WebSockets are blocked.
    this.#socket = connect(realtime.url, {
      path: realtime.path,
      auth: { token },
      reconnection: false,
      withCredentials: false,
      transports: ['websocket', 'polling'],
      tryAllTransports: true,
    });
    const socket = this.#socket;
    this.#doubt = new SocketDoubt(systemTimers, {
      doubted: () => handlers.onDown(),
      trusted: () => {
        if (!this.#stopped && socket.connected) handlers.onUp();
      },
      dead: () => {
        socket.disconnect();
        this.#reconnectLater();
      },
    });
    const heard = () => this.#doubt.heard();
    socket.io?.on('ping', heard);
    socket.io?.on('packet', heard);
    socket.on('connect', () => {
      heard();
      // The backoff is not reset here: see SOCKET_HEALTHY_MS.
      this.#upSince = Date.now();
      handlers.onUp();
    });
    socket.on('disconnect', (reason) => {
      if (this.#upSince !== null && Date.now() - this.#upSince >= SOCKET_HEALTHY_MS) this.#attempt = 0;
      this.#upSince = null;
      this.#doubt.reset();
      handlers.onDown();
      // Closed by the server (after `ended`), a proxy or the network. Closed by this side, it was
      // stopped, or taken for dead (which reconnects itself).
      if (reason !== 'io client disconnect') this.#reconnectLater(this.#endWaitMs);
      this.#endWaitMs = 0;
    });
    socket.on('connect_error', (error: Error & { data?: Partial<SocketEnd> }) => {
      const data = error.data;
      if (data?.final) return this.#final({ code: data.code ?? 'unauthorized', final: true, message: data.message ?? error.message });
      // A rate-limited refusal says how long to wait (retry_after, seconds).
      this.#reconnectLater(retryAfterMs(data?.retry_after));
    });
    socket.on('work', (work) => handlers.onWork(work));
    socket.on('ended', (end) => {
      if (end.final) return this.#final(end);
      // A retry ending may say how long to wait (a node whose store is struggling): the reconnect
      // after the disconnect that follows waits that long, spread out.
      this.#endWaitMs = retryAfterMs(end.retry_after);
    });
  }

  get connected(): boolean {
    return !this.#stopped && this.#socket.connected && !this.#doubt.doubted;
  }

  /** POST /engine/heartbeat over the socket; rejects like the REST call would. */
  async heartbeat(report: HeartbeatRequest): Promise<HeartbeatResponse> {
    const answer = (await this.#request('heartbeat', report)) as HeartbeatResponse | SocketRefusal;
    // With the status REST answers the code with, so callers treat it as they treat a REST refusal.
    if (!answer.ok) throw new ApiError(statusOf(answer.error), answer.error, answer.message, retryAfterMs(answer.retry_after));
    return answer;
  }

  /** Sends results of pushed commands; resolves true when the server took them. */
  async ack(acks: CommandAck[]): Promise<boolean> {
    if (!this.connected) return false;
    try {
      const answer = (await this.#request('ack', acks)) as { ok?: boolean } | undefined;
      return answer?.ok === true;
    } catch {
      return false;
    }
  }

  /**
   * An event with its answer. When none comes in time, the engine heartbeats over REST (engine.ts),
   * and the socket is closed and opened again if nothing at all, not even a ping, came on it for
   * SOCKET_SILENT_MS: a connection that died without a word looks connected until its ping
   * timeout, and meanwhile no work is pushed. Until then it is in doubt (`#doubt`). A slow
   * server still pings: its sockets stay.
   */
  async #request(event: 'heartbeat' | 'ack', payload: unknown): Promise<unknown> {
    const socket = this.#socket;
    const timed = socket.timeout(REPLY_TIMEOUT_MS);
    try {
      return await (timed.emitWithAck as (event: string, payload: unknown) => Promise<unknown>).call(timed, event, payload);
    } catch (error) {
      if (socket.connected && !this.#stopped) this.#doubt.unanswered();
      throw error;
    }
  }

  stop(): void {
    this.#stopped = true;
    this.#doubt.reset();
    clearTimeout(this.#retry);
    this.#socket.disconnect();
  }

  #final(end: SocketEnd): void {
    if (this.#stopped) return;
    this.stop();
    this.#handlers.onFinal(end);
  }

  /** Reconnects after a full-jitter backoff, or after `waitMs` (a refusal's or an ending's retry_after) spread out, whichever is longer. */
  #reconnectLater(waitMs = 0): void {
    if (this.#stopped || this.#retry !== undefined) return;
    const delay = Math.max(250, reconnectWait(waitMs, this.#attempt++, SOCKET_BACKOFF, this.#random));
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (!this.#stopped) this.#socket.connect();
    }, delay);
  }
}
