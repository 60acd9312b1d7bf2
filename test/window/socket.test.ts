/** The engine socket: final ends stop it for good, other ends reconnect with backoff (fake timers), replies map to ApiError. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Realtime } from '../../shared/types.js';
import { ApiError } from '../../window/src/api.js';
import { EngineSocket, SOCKET_HEALTHY_MS, type EngineSocketIo, type SocketHandlers } from '../../window/src/socket.js';
import { SOCKET_SILENT_MS } from '../../shared/events.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

class FakeIo {
  connected = false;
  active = true;
  readonly listeners = new Map<string, Array<(...args: any[]) => void>>();
  readonly emitted: Array<{ event: string; args: unknown[] }> = [];
  readonly managerListeners = new Map<string, Array<() => void>>();
  /** socket.io-client's Manager, as far as the window listens to it */
  readonly io = {
    on: (event: string, listener: () => void) => {
      this.managerListeners.set(event, [...(this.managerListeners.get(event) ?? []), listener]);
      return this.io;
    },
  };
  /** a ping from the server arrives on the connection */
  ping() {
    for (const listener of this.managerListeners.get('ping') ?? []) listener();
  }
  reply: (event: string, args: unknown[]) => Promise<unknown> = async () => ({ ok: true });
  connect = vi.fn(() => {
    this.active = true;
    return this;
  });
  disconnect = vi.fn(() => {
    this.active = false;
    this.connected = false;
    return this;
  });
  on(event: string, listener: (...args: any[]) => void) {
    this.listeners.set(event, [...(this.listeners.get(event) ?? []), listener]);
    return this;
  }
  fire(event: string, ...args: unknown[]) {
    for (const listener of this.listeners.get(event) ?? []) listener(...args);
  }
  timeout(_ms: number) {
    return {
      emitWithAck: (event: string, ...args: unknown[]) => {
        this.emitted.push({ event, args });
        return this.reply(event, args);
      },
    };
  }
}

const REALTIME: Realtime = { url: 'http://127.0.0.1:8081', path: '/socket.io', available: true };

function open() {
  const io = new FakeIo();
  const connect = vi.fn(() => io as unknown as EngineSocketIo);
  const handlers: SocketHandlers = { onUp: vi.fn(), onDown: vi.fn(), onWork: vi.fn(), onFinal: vi.fn() };
  const socket = new EngineSocket(connect, REALTIME, 'c2ce_token', handlers, () => 0.5);
  return { io, connect, handlers, socket };
}

describe('EngineSocket', () => {
  it('connects to the realtime url and path with auth {token}, WebSocket first (no sticky session needed), long-polling where it is blocked', () => {
    const { connect } = open();
    expect(connect).toHaveBeenCalledWith(
      'http://127.0.0.1:8081',
      expect.objectContaining({ path: '/socket.io', auth: { token: 'c2ce_token' }, transports: ['websocket', 'polling'], tryAllTransports: true }),
    );
  });

  it('passes work on and reports up and down', () => {
    const { io, handlers } = open();
    io.connected = true;
    io.fire('connect');
    io.fire('work', { commands: [], dial_requests: [] });
    io.fire('disconnect', 'transport close');
    expect(handlers.onUp).toHaveBeenCalledTimes(1);
    expect(handlers.onWork).toHaveBeenCalledWith({ commands: [], dial_requests: [] });
    expect(handlers.onDown).toHaveBeenCalledTimes(1);
  });

  it('a final `ended` stops it and never reconnects', async () => {
    const { io, handlers, socket } = open();
    io.connected = true;
    const end = { code: 'replaced', final: true, message: 'This call window was closed or replaced by a newer one.' };
    io.fire('ended', end);
    io.fire('disconnect', 'io server disconnect');
    await vi.advanceTimersByTimeAsync(120_000);
    expect(handlers.onFinal).toHaveBeenCalledWith(end);
    expect(io.disconnect).toHaveBeenCalled();
    expect(io.connect).not.toHaveBeenCalled();
    expect(socket.connected).toBe(false);
  });

  it('a non-final end reconnects after a backoff', async () => {
    const { io, handlers } = open();
    io.fire('ended', { code: 'server_restarting', final: false, message: 'restarting' });
    io.active = false;
    io.fire('disconnect', 'io server disconnect');
    expect(handlers.onFinal).not.toHaveBeenCalled();
    expect(io.connect).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(500);
    expect(io.connect).toHaveBeenCalledTimes(1);
  });

  it('a non-final end that says how long to wait reconnects no sooner, spread over it', async () => {
    const { io } = open();
    io.connected = true;
    io.fire('connect');
    io.fire('ended', { code: 'service_unavailable', final: false, message: 'The state store is unavailable.', retry_after: 4 });
    io.connected = false;
    io.fire('disconnect', 'io server disconnect');
    // random() is 0.5 here: the wait and half of it again
    await vi.advanceTimersByTimeAsync(5999);
    expect(io.connect).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(io.connect).toHaveBeenCalledTimes(1);
    // the next drop, with no ending, is the backoff's again
    io.connected = true;
    io.fire('connect');
    io.connected = false;
    io.fire('disconnect', 'transport close');
    await vi.advanceTimersByTimeAsync(1000);
    expect(io.connect).toHaveBeenCalledTimes(2);
  });

  it("reconnects itself, socket.io-client's reconnection off, after any close it did not ask for", async () => {
    const { io, connect } = open();
    expect(connect).toHaveBeenCalledWith(REALTIME.url, expect.objectContaining({ reconnection: false }));
    io.connected = true;
    io.fire('connect');
    io.connected = false;
    io.fire('disconnect', 'transport close'); // a proxy cut it
    await vi.advanceTimersByTimeAsync(500);
    expect(io.connect).toHaveBeenCalledTimes(1);
    // a transport error on connecting is retried too (socket.io-client would not, its reconnection off)
    io.fire('connect_error', new Error('websocket error'));
    await vi.advanceTimersByTimeAsync(1000);
    expect(io.connect).toHaveBeenCalledTimes(2);
  });

  it('reconnects a socket dropped right after each handshake ever more slowly; one that stayed up SOCKET_HEALTHY_MS starts from the base again', async () => {
    const { io } = open();
    /** Connects, stays up `upMs`, is ended (not final); returns how long it took to reconnect. */
    const reconnectDelay = async (upMs: number) => {
      io.connected = true;
      io.fire('connect');
      await vi.advanceTimersByTimeAsync(upMs);
      const connects = io.connect.mock.calls.length;
      io.fire('ended', { code: 'service_unavailable', final: false, message: 'The state store is unavailable.' });
      io.connected = false;
      io.fire('disconnect', 'io server disconnect');
      let waited = 0;
      while (io.connect.mock.calls.length === connects) {
        await vi.advanceTimersByTimeAsync(10);
        waited += 10;
      }
      return waited;
    };
    // random() is 0.5 here: half of a cap that doubles from 1 s
    const delays = [];
    for (let i = 0; i < 4; i++) delays.push(await reconnectDelay(0));
    expect(delays).toEqual([500, 1000, 2000, 4000]);
    expect(await reconnectDelay(SOCKET_HEALTHY_MS - 1)).toBe(8000);
    expect(await reconnectDelay(SOCKET_HEALTHY_MS)).toBe(500);
  });

  it('a handshake refusal marked final stops it; a retryable one the client would not retry is retried', async () => {
    const retry = open();
    retry.io.active = false;
    retry.io.fire('connect_error', Object.assign(new Error('busy'), { data: { code: 'service_unavailable', final: false, message: 'busy' } }));
    await vi.advanceTimersByTimeAsync(1000);
    expect(retry.io.connect).toHaveBeenCalledTimes(1);

    const final = open();
    final.io.fire('connect_error', Object.assign(new Error('no'), { data: { code: 'unauthorized', final: true, message: 'no' } }));
    expect(final.handlers.onFinal).toHaveBeenCalledWith({ code: 'unauthorized', final: true, message: 'no' });
    await vi.advanceTimersByTimeAsync(60_000);
    expect(final.io.connect).not.toHaveBeenCalled();
  });

  it('a rate-limited handshake waits the retry_after it was given, and a random share of it on top, before reconnecting', async () => {
    const { io, handlers } = open();
    io.active = false;
    io.fire('connect_error', Object.assign(new Error('slow down'), { data: { code: 'rate_limited', final: false, message: 'slow down', retry_after: 40 } }));
    // random() is 0.5 here: 40 s, then half of 30 s (the share is capped there)
    await vi.advanceTimersByTimeAsync(54_999);
    expect(io.connect).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    expect(io.connect).toHaveBeenCalledTimes(1);
    expect(handlers.onFinal).not.toHaveBeenCalled();
  });

  it("takes a retry_after as a floor that its own backoff outgrows when the server keeps asking for it", async () => {
    // a node cut off from its store refuses every handshake with a 5 s retry_after for as long as that lasts
    const { io, handlers } = open();
    io.active = false;
    const refuse = () =>
      io.fire('connect_error', Object.assign(new Error('isolated'), { data: { code: 'service_unavailable', final: false, message: 'This node is cut off from the service.', retry_after: 5 } }));
    // random() is 0.5: the wait and half of it again, 7.5 s, while the backoff (500 ms doubling) is
    // shorter; from the fifth refusal in a row, half of the backoff's 16 s outgrows it
    for (const [refusal, wait] of [7500, 7500, 7500, 7500, 8000].entries()) {
      refuse();
      await vi.advanceTimersByTimeAsync(wait - 1);
      expect(io.connect).toHaveBeenCalledTimes(refusal);
      await vi.advanceTimersByTimeAsync(1);
      expect(io.connect).toHaveBeenCalledTimes(refusal + 1);
    }
    expect(handlers.onFinal).not.toHaveBeenCalled();
  });

  it('sends heartbeats and acks over the socket; an error envelope becomes an ApiError, with the wait a rate-limited one asked for', async () => {
    const { io, socket } = open();
    io.connected = true;
    io.reply = async (event) => (event === 'heartbeat' ? { ok: false, error: 'unauthorized', message: 'closed' } : { ok: true });
    const report = { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null, acks: [] } as const;
    const failure = await socket.heartbeat({ ...report, acks: [] }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ApiError);
    expect(failure).toMatchObject({ status: 401, code: 'unauthorized', retryAfterMs: 0 });
    io.reply = async () => ({ ok: false, error: 'rate_limited', message: 'Too many requests.', retry_after: 7 });
    expect(await socket.heartbeat({ ...report, acks: [] }).catch((error: unknown) => error)).toMatchObject({ status: 429, code: 'rate_limited', retryAfterMs: 7000 });
    io.reply = async (event) => (event === 'heartbeat' ? { ok: false, error: 'unauthorized', message: 'closed' } : { ok: true });
    expect(await socket.ack([{ command_id: 1, result: 'done' }])).toBe(true);
    expect(io.emitted.at(-1)).toEqual({ event: 'ack', args: [[{ command_id: 1, result: 'done' }]] });
    io.reply = async () => {
      throw new Error('operation has timed out');
    };
    expect(await socket.ack([{ command_id: 1, result: 'done' }])).toBe(false);
  });

  it('takes a socket that leaves a request unanswered as down until it is heard again, and closes it if it stays silent for 12.5 s', async () => {
    const { io, socket, handlers } = open();
    io.connected = true;
    io.fire('connect');
    io.reply = async () => {
      throw new Error('operation has timed out');
    };
    const report = { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null, acks: [] } as const;
    const beat = () => expect(socket.heartbeat({ ...report, acks: [] })).rejects.toThrow('operation has timed out');
    // a slow server still pings: after an unanswered request its socket is in doubt, not closed
    await vi.advanceTimersByTimeAsync(SOCKET_SILENT_MS + 1000);
    io.ping();
    await beat();
    expect(io.disconnect).not.toHaveBeenCalled();
    expect(socket.connected).toBe(false); // in doubt: the engine heartbeats over REST
    expect(handlers.onDown).toHaveBeenCalledTimes(1);
    // heard again: trusted again
    io.ping();
    expect(socket.connected).toBe(true);
    expect(handlers.onUp).toHaveBeenCalledTimes(2);
    // in doubt again, and silent from then on: closed SOCKET_SILENT_MS after it was last heard
    await vi.advanceTimersByTimeAsync(2000);
    await beat();
    expect(io.disconnect).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(SOCKET_SILENT_MS - 2000);
    expect(io.disconnect).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(io.connect).toHaveBeenCalledTimes(1);
    // a request failing on a socket already known down changes nothing
    await expect(socket.heartbeat({ ...report, acks: [] })).rejects.toThrow();
    expect(io.disconnect).toHaveBeenCalledTimes(1);
  });
});
