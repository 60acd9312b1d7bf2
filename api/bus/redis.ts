/**
 * The Redis bus: PUBLISH/SUBSCRIBE on one channel. Every client has an `error` listener, so losing
 * Redis never crashes a node; while Redis is down, publishes are dropped (the store stays the
 * truth) and, when the subscription comes back, handlers get `resync`.
 */
import { connectedRedis, redisClient } from '../redis.js';
import type { Bus, BusMessage, BusState } from './bus.js';

export const BUS_CHANNEL = 'c2c:bus';

export async function createRedisBus(url: string): Promise<Bus> {
  const pub = await connectedRedis(url, 'c2c-bus-pub');
  // The subscriber queues its SUBSCRIBE until connected; ioredis resubscribes after a reconnect.
  const sub = redisClient(url, 'c2c-bus-sub', { queueWhileOffline: true });
  const handlers = new Set<(message: BusMessage) => void>();
  let subscribed = false;
  let everSubscribed = false;

  const deliver = (message: BusMessage) => {
    for (const handler of [...handlers]) handler(message);
  };

  sub.on('message', (_channel: string, text: string) => {
    let message: BusMessage;
    try {
      message = JSON.parse(text) as BusMessage;
    } catch {
      return;
    }
    deliver(message);
  });
  sub.on('close', () => void (subscribed = false));
  sub.on('ready', () => {
    // ioredis re-subscribes on reconnect by itself (autoResubscribe); we only learn that it did.
    if (everSubscribed && !subscribed) {
      subscribed = true;
      deliver({ type: 'resync' });
    }
  });
  await sub.subscribe(BUS_CHANNEL);
  subscribed = true;
  everSubscribed = true;

  return {
    driver: 'redis',
    publish(message) {
      if (pub.status !== 'ready') return;
      pub.publish(BUS_CHANNEL, JSON.stringify(message)).catch(() => {});
    },
    subscribe(handler) {
      handlers.add(handler);
      return () => handlers.delete(handler);
    },
    state(): BusState {
      return subscribed && pub.status === 'ready' ? 'up' : 'down';
    },
    async close() {
      handlers.clear();
      sub.disconnect();
      pub.disconnect();
    },
  };
}
