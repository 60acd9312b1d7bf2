/**
 * The socket adapter's subscriber client (api/redis.ts, `adapterSubscriber`) through a Redis
 * outage: a subscription asked for while Redis is away — a room a socket joined meanwhile — is
 * made once Redis is back, however many reconnects failed in between; and one that fails is never
 * an unhandled rejection (the adapter does not await them: that stopped the gateway process). A
 * Redis server of the test's own is stopped and started again.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { adapterSubscriber, redisClient } from '../../api/redis.js';
import { redisUrl } from '../helpers/env.js';
import { freePort, spawnRedis, waitFor } from '../helpers/processes.js';

describe.skipIf(!redisUrl())("the adapter's subscriber client through a Redis outage", () => {
  const clients: Redis[] = [];
  const servers: Array<{ stop(): Promise<void> }> = [];
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    for (const server of servers) await server.stop();
  });

  /** A Redis server of the test's own, and the adapter's subscriber client on it. */
  async function subscriberOnOwnRedis() {
    const port = await freePort();
    const server = spawnRedis(port);
    servers.push(server);
    await server.start();
    const url = `redis://127.0.0.1:${port}`;
    const sub = adapterSubscriber(url);
    clients.push(sub);
    return { server, url, sub };
  }

  it('makes a subscription asked for during the outage once Redis is back, after several failed reconnects', async () => {
    const { server, url, sub } = await subscriberOnOwnRedis();
    const received: string[] = [];
    sub.on('smessage', (channel: string, message: string) => received.push(`${channel}=${message}`));
    await sub.ssubscribe('c2c-test:outage:before');

    await server.stop();
    await waitFor(async () => (sub.status === 'ready' ? undefined : true), 'the client to notice Redis is gone');
    // as the adapter does: the promise is dropped
    void sub.ssubscribe('c2c-test:outage:during');
    // reconnects back off 100, 200, 400, 800 ms: let several of them fail
    await new Promise((resolve) => setTimeout(resolve, 1600));
    await server.start();

    const pub = redisClient(url, 'c2c-test-outage-pub');
    clients.push(pub);
    await waitFor(async () => (pub.status === 'ready' ? true : undefined), 'the publisher to connect');
    // Redis holds both subscriptions again: the one made before and the one asked for during the outage
    const subscribers = async (channel: string) => Number(((await pub.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);
    await waitFor(async () => ((await subscribers('c2c-test:outage:during')) === 1 && (await subscribers('c2c-test:outage:before')) === 1 ? true : undefined), 'the subscriptions', 5000);
    await pub.spublish('c2c-test:outage:before', 'a');
    await pub.spublish('c2c-test:outage:during', 'b');
    await waitFor(async () => (received.length === 2 ? true : undefined), 'both messages');
    expect(received.sort()).toEqual(['c2c-test:outage:before=a', 'c2c-test:outage:during=b']);
  });

  it('queues at most one subscription command per room through an outage, and Redis ends with what was asked last', async () => {
    const { server, url, sub } = await subscriberOnOwnRedis();
    await sub.ssubscribe('c2c-test:compact:left');
    await sub.ssubscribe('c2c-test:compact:back');
    await server.stop();
    await waitFor(async () => (sub.status === 'ready' ? undefined : true), 'the client to notice Redis is gone');
    const queued = () => (sub as unknown as { offlineQueue: { length: number } }).offlineQueue.length;
    // as the adapter does through an outage: pages load and close (a room joined, then left), for hours
    for (let i = 0; i < 2000; i += 1) {
      void sub.ssubscribe(`c2c-test:compact:page-${i % 50}`);
      void sub.sunsubscribe(`c2c-test:compact:page-${i % 50}`);
    }
    void sub.ssubscribe('c2c-test:compact:joined');
    void sub.sunsubscribe('c2c-test:compact:left');
    void sub.sunsubscribe('c2c-test:compact:back');
    void sub.ssubscribe('c2c-test:compact:back');
    // joined, and left (the pair for back cancelled out)
    expect(queued()).toBe(2);
    await server.start();

    const pub = redisClient(url, 'c2c-test-compact-pub');
    clients.push(pub);
    await waitFor(async () => (pub.status === 'ready' ? true : undefined), 'the publisher to connect');
    const subscribers = async (channel: string) => Number(((await pub.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number])[1]);
    const counts = async () => Promise.all(['joined', 'left', 'back', 'page-7'].map((name) => subscribers(`c2c-test:compact:${name}`)));
    await waitFor(async () => (JSON.stringify(await counts()) === JSON.stringify([1, 0, 1, 0]) ? true : undefined), 'the subscriptions as asked last', 5000);
  });

  it('turns a subscription that fails (queued when the client closes) into no unhandled rejection', async () => {
    const port = await freePort();
    const sub = adapterSubscriber(`redis://127.0.0.1:${port}`);
    const unhandled: unknown[] = [];
    const note = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', note);
    try {
      void sub.ssubscribe('c2c-test:outage:never');
      sub.disconnect();
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      process.off('unhandledRejection', note);
    }
    expect(unhandled).toEqual([]);
    // a caller that awaits still sees the failure
    const awaited = adapterSubscriber(`redis://127.0.0.1:${port}`);
    const failing = awaited.ssubscribe('c2c-test:outage:awaited');
    awaited.disconnect();
    await expect(failing).rejects.toThrow();
  });
});
