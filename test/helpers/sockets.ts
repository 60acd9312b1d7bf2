/** Socket.IO clients for gateway suites: connect with a token and an Origin, and wait for events. */
import { io as connect, type Socket } from 'socket.io-client';

export interface TestSocket {
  socket: Socket;
  events: Array<{ event: string; payload: unknown }>;
  /** resolves with the first event of that name received from now on, or already received when `seen` */
  next<T = any>(event: string, options?: { timeoutMs?: number; where?: (payload: T) => boolean }): Promise<T>;
  close(): void;
}

export function openSocket(url: string, token: string, origin: string | undefined, options: { transports?: Array<'websocket' | 'polling'>; reconnect?: boolean; headers?: Record<string, string> } = {}): TestSocket {
  const socket = connect(url, {
    path: '/socket.io',
    auth: { token },
    transports: options.transports ?? ['websocket'],
    extraHeaders: { ...options.headers, ...(origin ? { origin } : {}) },
    reconnection: options.reconnect ?? false,
    reconnectionDelay: 200,
    reconnectionDelayMax: 1000,
    forceNew: true,
  });
  const events: TestSocket['events'] = [];
  const waiters: Array<{ event: string; where?: (payload: any) => boolean; resolve: (payload: any) => void }> = [];
  socket.onAny((event: string, payload: unknown) => {
    events.push({ event, payload });
    for (const waiter of [...waiters]) {
      if (waiter.event === event && (!waiter.where || waiter.where(payload))) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(payload);
      }
    }
  });
  for (const event of ['connect', 'connect_error', 'disconnect'] as const) {
    socket.on(event, (payload?: unknown) => {
      const value = event === 'connect_error' ? (payload as { data?: unknown; message?: string }).data ?? { message: (payload as Error).message } : payload;
      events.push({ event, payload: value });
      for (const waiter of [...waiters]) {
        if (waiter.event === event && (!waiter.where || waiter.where(value))) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(value);
        }
      }
    });
  }
  return {
    socket,
    events,
    next(event, options = {}) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${event} within ${options.timeoutMs ?? 5000} ms; got ${events.map((e) => e.event).join(', ')}`)), options.timeoutMs ?? 5000);
        waiters.push({ event, where: options.where, resolve: (payload) => { clearTimeout(timer); resolve(payload); } });
      });
    },
    close: () => void socket.close(),
  };
}

/** Emits with an acknowledgement and resolves with the server's reply. */
export function request<T = any>(socket: Socket, event: string, payload: unknown, timeoutMs = 5000): Promise<T> {
  return socket.timeout(timeoutMs).emitWithAck(event, payload) as Promise<T>;
}

/**
 * A widget socket's snapshot: the state sent on connect, the one with session_expires_at (pushes
 * omit it). Pushes of changes made just before the socket opened may arrive before or after it, by
 * design (clients keep the newest version); every change made after it has a newer version.
 */
export function snapshotOf<T = any>(socket: TestSocket): Promise<T> {
  return socket.next<T>('state', { where: (state) => (state as { session_expires_at?: number }).session_expires_at !== undefined });
}

/**
 * Moves a manual clock forward a step at a time until the socket hears `ended`, giving it up to
 * `settleMs` of real time after each step: the clock never runs ahead of a slow machine, so where
 * the ending happened on the clock can be asserted. Resolves with the ending's payload.
 */
export async function advanceUntilEnded<T = any>(clock: { advance(ms: number): Promise<void> }, socket: TestSocket, stepMs: number, maxSteps = 30, settleMs = 2000): Promise<T> {
  const ended = socket.next<T>('ended', { timeoutMs: (maxSteps + 1) * (settleMs + 1000) });
  const heard = ended.then(() => true);
  for (let step = 0; step < maxSteps; step += 1) {
    await clock.advance(stepMs);
    const now = await Promise.race([heard, new Promise<false>((resolve) => setTimeout(() => resolve(false), settleMs))]);
    if (now) return ended;
  }
  throw new Error(`no ended within ${maxSteps} steps of ${stepMs} ms; got ${socket.events.map((e) => e.event).join(', ')}`);
}
