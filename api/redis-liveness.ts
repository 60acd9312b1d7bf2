/**
 * Noticing a Redis that stopped answering. A Redis that is frozen (a paused process, a stalled VM)
 * or cut off by a network that drops packets instead of resetting the connection leaves the
 * connection open: the client stays `ready`, a subscriber just hears nothing, and what is sent
 * piles up unanswered. The node would not know: its bus would stay up, so the gateway's outage
 * catch-up (gateway/catch-up.ts) would never start, and its sockets, whose clients poll only while
 * they are disconnected, would go stale for as long as the silence lasts.
 *
 * So each connection is asked a PING every PROBE_EVERY_MS, and one that leaves a PING unanswered
 * for SILENT_AFTER_MS, with nothing at all heard on it meanwhile, is closed. (A PING whose answer
 * waits behind a long reply, or behind messages a busy node has not read yet, is late, but Redis is
 * talking: that connection is kept.) ioredis then reconnects as after any drop; the bus is down until
 * Redis answers again (a new connection stays short of `ready` until Redis answers its ready
 * check), and then every node resyncs. Redis answers a PING in well under a millisecond, but one
 * running a long script or module command answers nothing until it ends, or until its own
 * busy-reply-threshold (5 s by default) makes it answer BUSY: the bound is twice that, so a Redis
 * that is merely busy is not cut, and every node does not resync at once for it.
 *
 * A new connection that Redis took but never answered (it froze as it accepted, or the network
 * began dropping packets) is closed by the same bound: ioredis's connect timeout ends with the TCP
 * handshake, and its ready check would otherwise wait as long as the kernel keeps the connection.
 *
 * The probe runs on real time that never steps (steadyClock) by default, as ioredis's own connect
 * timeout and reconnect backoff do, not on the service's clock: tests move that clock in leaps,
 * running its timers with no I/O in between, and no PING can be answered inside a leap. A test
 * that checks the probe drives it with a clock of its own.
 */
import type { Redis } from 'ioredis';
import type { Clock, Timer } from './clock.js';

export const PROBE_EVERY_MS = 1000;
export const SILENT_AFTER_MS = 10_000;

interface Probe {
  sentAt: number;
  /** the connection it was sent on: the one to close if it is not answered */
  stream: Redis['stream'];
}

/** Probes the client until it ends; returns what stops it (redisClient calls it on disconnect()). */
export function closeWhenSilent(client: Redis, clock: Clock): () => void {
  let waiting: Probe | undefined;
  let next: Timer | undefined;
  let stopped = false;
  /** when the current connection last brought anything from Redis */
  let heardAt = clock.now();
  const heard = () => void (heardAt = clock.now());
  client.on('connect', () => {
    heardAt = clock.now();
    client.stream.on('data', heard);
  });
  const answered = (probe: Probe) => () => {
    if (waiting === probe) waiting = undefined;
  };
  const judge = (overdue: Probe) => {
    if (waiting !== overdue || clock.now() - heardAt < SILENT_AFTER_MS) return;
    waiting = undefined;
    // Only the silent connection: a PING re-sent on the next one must not close that one.
    if (client.stream === overdue.stream) overdue.stream.destroy();
  };
  const judgeHandshake = (stream: Redis['stream']) => {
    if (client.status === 'connect' && client.stream === stream && clock.now() - heardAt >= SILENT_AFTER_MS) stream.destroy();
  };
  // Judged once Node has read what the connection holds: a node whose own event loop stalled runs
  // its overdue timers before it reads an answer that arrived meanwhile. The second setImmediate
  // comes after the event loop has polled for I/O at least once; the first may not.
  const afterReading = <T>(judgement: (subject: T) => void, subject: T): void => void setImmediate(() => setImmediate(judgement, subject));
  const tick = () => {
    if (stopped) return;
    next = clock.after(PROBE_EVERY_MS, tick);
    // A PING sent on a connection that has since closed says nothing of this one. A client that
    // does not resend what was on its way (the rate counters') never settles it either.
    if (waiting && waiting.stream !== client.stream) waiting = undefined;
    if (waiting && clock.now() - waiting.sentAt >= SILENT_AFTER_MS) return afterReading(judge, waiting);
    // Connected, with ioredis's ready check (no PING can go before it) unanswered since.
    if (client.status === 'connect' && clock.now() - heardAt >= SILENT_AFTER_MS) return afterReading(judgeHandshake, client.stream);
    if (!waiting && client.status === 'ready') {
      const probe: Probe = { sentAt: clock.now(), stream: client.stream };
      waiting = probe;
      client.ping().then(answered(probe), answered(probe));
    }
  };
  const stop = () => {
    stopped = true;
    next?.cancel();
  };
  // disconnect() on a client waiting to reconnect emits no 'end': redisClient stops the probe itself.
  client.once('end', stop);
  next = clock.after(PROBE_EVERY_MS, tick);
  return stop;
}
