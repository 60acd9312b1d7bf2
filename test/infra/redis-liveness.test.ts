/**
 * Every Redis connection of ours closes itself when Redis stops answering without closing it
 * (api/redis-liveness.ts), so the node sees the outage and acts on it; and one whose Redis answers
 * is never closed. A Redis server of the test's own is paused (SIGSTOP: its connections stay open
 * and answer nothing) and resumed; the probes run on a clock the test moves.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { ManualClock } from '../../api/clock.js';
import { redisClient } from '../../api/redis.js';
import { PROBE_EVERY_MS, SILENT_AFTER_MS } from '../../api/redis-liveness.js';
import { redisUrl } from '../helpers/env.js';
import { freePort, spawnRedis, waitFor } from '../helpers/processes.js';

describe.skipIf(!redisUrl())('a Redis connection whose Redis stops answering', () => {
  let redis: ReturnType<typeof spawnRedis>;
  let client: Redis;
  let clock: ManualClock;
  let closes: number;

  const ready = () => waitFor(async () => (client.status === 'ready' ? true : undefined), 'the client to be ready', 10_000);
  /** Redis freezes; a probe then goes unanswered for the bound, and the connection is closed (the `count`th time). */
  const freezeUntilClosed = async (count: number, what: string, timeoutMs?: number) => {
    redis.pause();
    await clock.advance(PROBE_EVERY_MS + SILENT_AFTER_MS);
    await waitFor(async () => (closes >= count ? true : undefined), what, timeoutMs);
  };

  async function connect(options: { subscriber?: boolean; resendInFlight?: boolean } = {}) {
    const port = await freePort();
    redis = spawnRedis(port);
    await redis.start();
    clock = new ManualClock();
    client = redisClient(`redis://127.0.0.1:${port}`, 'c2c-test-liveness', { clock, queueWhileOffline: options.subscriber, resendInFlight: options.resendInFlight });
    closes = 0;
    client.on('close', () => (closes += 1));
    await ready();
  }

  afterEach(async () => {
    redis.resume();
    client.disconnect();
    await redis.stop();
  });

  it('is closed once a PING has gone unanswered for SILENT_AFTER_MS, and is ready again when Redis answers', async () => {
    await connect();
    redis.pause();
    await clock.advance(PROBE_EVERY_MS);
    await clock.advance(SILENT_AFTER_MS - 1);
    // not a moment before the bound: a Redis merely slow to answer is not cut (a connection
    // closed now would say so within the real moment given here)
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(client.status).toBe('ready');
    expect(closes).toBe(0);

    await clock.advance(1);
    await waitFor(async () => (closes > 0 ? true : undefined), 'the silent connection to close');
    // It reconnects, but a paused Redis does not answer the ready check: the node sees Redis as away.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(client.status).not.toBe('ready');

    redis.resume();
    await ready();
    expect(await client.ping()).toBe('PONG');
  }, 30_000);

  it('closes a silent subscriber too, which resubscribes once Redis answers', async () => {
    await connect({ subscriber: true });
    const heard: string[] = [];
    client.on('message', (_channel: string, message: string) => heard.push(message));
    await client.subscribe('c2c-test:liveness');
    await freezeUntilClosed(1, 'the silent subscriber to close');

    redis.resume();
    await ready();
    const publisher = client.duplicate();
    try {
      await waitFor(async () => ((await publisher.publish('c2c-test:liveness', 'after')) > 0 ? true : undefined), 'the subscription to be back');
      await waitFor(async () => (heard.includes('after') ? true : undefined), 'the message');
    } finally {
      publisher.disconnect();
    }
  }, 30_000);

  it('closes a new connection whose ready check a frozen Redis never answers, and goes on trying', async () => {
    await connect();
    await freezeUntilClosed(1, 'the silent connection to close');
    // The paused server's kernel still completes the TCP handshake: the client is connected, and
    // waits on its ready check (ioredis's connect timeout ended with the handshake).
    await waitFor(async () => (client.status === 'connect' ? true : undefined), 'a new connection', 10_000);
    await clock.advance(SILENT_AFTER_MS - PROBE_EVERY_MS);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(closes).toBe(1);
    await clock.advance(2 * PROBE_EVERY_MS);
    await waitFor(async () => (closes > 1 ? true : undefined), 'the unanswered connection to close', 5000);

    redis.resume();
    await ready();
    expect(await client.ping()).toBe('PONG');
  }, 30_000);

  it('goes on probing after a drop took a PING with it that a client which does not resend never settles', async () => {
    // as the rate counters' connection (api/ratelimit/index.ts)
    await connect({ resendInFlight: false });
    redis.pause();
    await clock.advance(PROBE_EVERY_MS);
    // Redis goes away with the PING unanswered, and comes back.
    await redis.stop();
    await waitFor(async () => (closes > 0 ? true : undefined), 'the drop');
    await redis.start();
    await ready();
    // Then it freezes: the new connection is found silent within the same bound.
    await freezeUntilClosed(2, 'the silent connection to close', 5000);
  }, 30_000);

  it("does not close a connection whose answer came while the node's own event loop was stalled", async () => {
    await connect();
    await clock.advance(PROBE_EVERY_MS);
    // The node stalls, reading nothing, while Redis answers the PING; when it resumes, the probe's
    // timer is overdue and runs before the answer waiting on the connection is read.
    const resumeAt = Date.now() + 200;
    while (Date.now() < resumeAt) {
      // stalled
    }
    await clock.advance(SILENT_AFTER_MS);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(closes).toBe(0);
    expect(client.status).toBe('ready');
  });

  it('keeps a connection whose answer waits behind a long reply the node is still reading', async () => {
    await connect();
    const setter = client.duplicate();
    try {
      await new Promise((resolve) => setter.once('ready', resolve));
      await setter.set('c2c-test:liveness:big', 'x'.repeat(40 * 1024 * 1024));
    } finally {
      setter.disconnect();
    }
    // A 40 MB reply, then the probe's PING behind it on the same connection.
    const big = client.get('c2c-test:liveness:big');
    await clock.advance(PROBE_EVERY_MS);
    // The node reads nothing while Redis sends. Once Redis is seen sending (on a busy machine it may
    // take a while to start), the node stalls a moment more, so the kernel's buffers fill.
    client.stream.pause();
    await waitFor(async () => (client.stream.readableLength > 0 ? true : undefined), 'Redis to start sending', 10_000);
    const resumeAt = Date.now() + 200;
    while (Date.now() < resumeAt) {
      // stalled
    }
    // What Node had read is heard now, before the leap. When the node resumes, the PING is overdue
    // and its answer still megabytes away (Node reads a few MB per turn of its event loop), but
    // Redis is talking: only the judgement after reading (redis-liveness.ts) can know.
    client.stream.resume();
    await new Promise((resolve) => process.nextTick(resolve));
    await clock.advance(SILENT_AFTER_MS);
    expect((await big)?.length).toBe(40 * 1024 * 1024);
    expect(closes).toBe(0);
    expect(await client.ping()).toBe('PONG');
  }, 30_000);

  it('never closes a connection whose Redis answers, however long it runs', async () => {
    await connect();
    for (let second = 0; second < 4 * (SILENT_AFTER_MS / PROBE_EVERY_MS); second += 1) {
      await clock.advance(PROBE_EVERY_MS);
      // Redis answers a connection's commands in order: once this PING is answered, the probe's is.
      await client.ping();
    }
    expect(closes).toBe(0);
    expect(client.status).toBe('ready');
  });
});
