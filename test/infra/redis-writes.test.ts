/** writeTogether (api/redis.ts): a turn's commands leave in one write, and each still gets its own reply. */
import { afterAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { connectedRedis, writeTogether } from '../../api/redis.js';
import { redisUrl } from '../helpers/env.js';

const url = redisUrl();

describe.skipIf(!url)('Redis commands written together', () => {
  const clients: Redis[] = [];
  afterAll(() => {
    for (const client of clients) client.disconnect();
  });

  it('holds the commands of one turn of the event loop and sends them at its end, each answered', async () => {
    const client = writeTogether(await connectedRedis(url!, 'c2c-test-write-together'));
    clients.push(client);
    const replies = Array.from({ length: 50 }, (_, i) => client.echo(`m${i}`));
    // held: nothing has been written yet in this turn
    expect(client.stream.writableCorked).toBe(1);
    expect(client.stream.writableLength).toBeGreaterThan(0);
    expect(await Promise.all(replies)).toEqual(Array.from({ length: 50 }, (_, i) => `m${i}`));
    expect(client.stream.writableCorked).toBe(0);
    // the next turn corks again, once
    const next = [client.echo('a'), client.echo('b')];
    expect(client.stream.writableCorked).toBe(1);
    expect(await Promise.all(next)).toEqual(['a', 'b']);
  });

  it('subscribes every channel asked for in one turn', async () => {
    const sub = writeTogether(await connectedRedis(url!, 'c2c-test-write-together-sub'));
    const pub = await connectedRedis(url!, 'c2c-test-write-together-pub');
    clients.push(sub, pub);
    const channels = Array.from({ length: 100 }, (_, i) => `c2c-test:wt:${i}`);
    const got = new Set<string>();
    sub.on('smessage', (channel: string) => got.add(channel));
    await Promise.all(channels.map((channel) => sub.ssubscribe(channel)));
    for (const channel of channels) await pub.spublish(channel, 'x');
    const deadline = Date.now() + 3000;
    while (got.size < channels.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(got.size).toBe(channels.length);
  });
});
