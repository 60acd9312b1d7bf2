/**
 * The count of changes a node cut off from Redis could not announce (api/domain/push-debt.ts): made
 * for what the node announces while its bus is down, and only then; waited for by a short-lived
 * node (c2c) before it closes; and read by a node whose bus is up, which then reads everything again.
 * The whole path, across two nodes, is in test/gateway/partition.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRedisBus } from '../../api/bus/redis.js';
import type { Bus, BusMessage } from '../../api/bus/index.js';
import { ManualClock } from '../../api/clock.js';
import { LIMITS } from '../../shared/limits.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { createHarness, type Harness } from '../helpers/harness.js';
import { busReaches, ownRedis } from '../helpers/own-redis.js';

describe.skipIf(!redisUrl()).each(storeDrivers())('changes other nodes missed, on %s', (driver) => {
  let redis: Awaited<ReturnType<typeof ownRedis>>;
  let bus: Bus;
  let clock: ManualClock;
  let h: Harness;
  let stopPushing: () => void;

  const counted = async () => {
    const [row] = await h.services.db.query<{ last_value: string | number; is_called: boolean }>('SELECT last_value, is_called FROM push_debt');
    return row!.is_called ? Number(row!.last_value) : 0;
  };
  const change: BusMessage = { type: 'member', memberId: 'm_1' };

  beforeEach(async () => {
    redis = await ownRedis();
    clock = new ManualClock();
    bus = await createRedisBus(redis.url, clock, new ManualClock());
    h = await createHarness(driver, {}, { bus, clock });
    stopPushing = h.services.pusher.start();
  });

  afterEach(async () => {
    stopPushing();
    await h.close();
    await bus.close();
    await redis.stop();
  });

  it('counts nothing while the bus is up, and what the node announces once it is down, before a short-lived node closes', async () => {
    bus.publish(change);
    expect(await h.services.pusher.settled()).toBe(true);
    expect(await counted()).toBe(0);

    await redis.stop();
    await busReaches(bus, 'down', 'the bus to notice Redis is gone');
    bus.publish(change);
    bus.publish(change);
    bus.publish(change);
    // c2c waits for its pushes before it closes: the count too, which is all other nodes will hear of its step
    expect(await h.services.pusher.settled()).toBe(true);
    const after = await counted();
    // each change is counted by a bump made after it: the three of one moment share the bumps under way
    expect(after).toBeGreaterThanOrEqual(1);
    expect(after).toBeLessThanOrEqual(3);
    await redis.start();
    await busReaches(bus, 'up', 'the bus to be back');
  });

  it('counts once as it finds its bus down, with nothing announced since: what it announced before it knew may be lost too', async () => {
    await clock.advance(LIMITS.pollMs); // a tick with the bus up
    expect(await counted()).toBe(0);
    await redis.stop();
    await busReaches(bus, 'down', 'the bus to notice Redis is gone');
    await clock.advance(LIMITS.pollMs);
    expect(await h.services.pusher.settled()).toBe(true);
    expect(await counted()).toBe(1);
    // once for the outage, not once a tick
    await clock.advance(LIMITS.pollMs);
    expect(await h.services.pusher.settled()).toBe(true);
    expect(await counted()).toBe(1);
    await redis.start();
    await busReaches(bus, 'up', 'the bus to be back');
  });

  it('reads everything again when the count moved: its caches empty, as after its own outage', async () => {
    const heard: string[] = [];
    bus.subscribe((message) => heard.push(message.type));
    await clock.advance(LIMITS.pollMs); // the baseline
    await clock.advance(LIMITS.pollMs);
    expect(heard).not.toContain('resync');
    // another node, cut off, counted a change
    await h.services.db.query("SELECT nextval('push_debt')");
    await clock.advance(LIMITS.pollMs);
    const resyncs = () => heard.filter((type) => type === 'resync').length;
    await expect.poll(resyncs).toBe(1);
    await clock.advance(LIMITS.pollMs);
    expect(resyncs()).toBe(1);

    // Its own counts, made while its bus was down, need nothing more than its reconnect's resync.
    await redis.stop();
    await busReaches(bus, 'down', 'the bus to notice Redis is gone');
    bus.publish(change);
    expect(await h.services.pusher.settled()).toBe(true);
    await redis.start();
    await busReaches(bus, 'up', 'the bus to be back');
    await expect.poll(resyncs).toBe(2); // the reconnect's
    await clock.advance(LIMITS.pollMs);
    await clock.advance(LIMITS.pollMs);
    expect(resyncs()).toBe(2);
    // another node's count still is news
    await h.services.db.query("SELECT nextval('push_debt')");
    await clock.advance(LIMITS.pollMs);
    await expect.poll(resyncs).toBe(3);
  });

  it("takes its own counts made before its first read into the baseline: another node's next count is still news", async () => {
    const heard: string[] = [];
    bus.subscribe((message) => heard.push(message.type));
    const resyncs = () => heard.filter((type) => type === 'resync').length;
    // a node that starts while its Redis is away: its first read waits for the bus, its counts do not
    stopPushing();
    await redis.stop();
    await busReaches(bus, 'down', 'the bus to notice Redis is gone');
    stopPushing = h.services.pusher.start();
    bus.publish(change);
    expect(await h.services.pusher.settled()).toBe(true);
    await redis.start();
    await busReaches(bus, 'up', 'the bus to be back');
    await expect.poll(resyncs).toBe(1); // the reconnect's
    await clock.advance(LIMITS.pollMs); // the baseline
    await h.services.db.query("SELECT nextval('push_debt')"); // another node, cut off, counted a change
    await clock.advance(LIMITS.pollMs);
    await expect.poll(resyncs).toBe(2);
  });
});
