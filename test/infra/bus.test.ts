/** The bus driver suite: in-process and Redis drivers deliver the same messages to every node. */
import { connect as connectTo, createServer, type AddressInfo, type Socket } from 'node:net';
import { io as connect } from 'socket.io-client';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { loadUws } from '../../gateway/uws.js';
import type { Bus, BusMessage } from '../../api/bus/index.js';
import { createMemoryBus } from '../../api/bus/memory.js';
import { BUS_CHANNEL, busChannels, createRedisBus } from '../../api/bus/redis.js';
import { connectedRedis } from '../../api/redis.js';
import { redisUrl } from '../helpers/env.js';
import { freePort, spawnRedis } from '../helpers/processes.js';

const waitFor = async (predicate: () => boolean, ms = 3000) => {
  const start = Date.now();
  while (!predicate()) {
    if (Date.now() - start > ms) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

type Pair = { a: Bus; b: Bus; close(): Promise<void> };

const drivers: Array<[string, () => Promise<Pair>]> = [
  ['memory', async () => {
    const bus = createMemoryBus();
    return { a: bus, b: bus, close: () => bus.close() };
  }],
];
const url = redisUrl();
if (url) {
  drivers.push(['redis', async () => {
    const a = await createRedisBus(url);
    const b = await createRedisBus(url);
    return { a, b, close: async () => { await a.close(); await b.close(); } };
  }]);
}

describe.each(drivers)('bus driver %s', (name, open) => {
  const opened: Pair[] = [];
  afterAll(async () => { for (const p of opened) await p.close(); });

  it('delivers a message published on one node to subscribers on every node', async () => {
    const pair = await open();
    opened.push(pair);
    const seenA: BusMessage[] = [];
    const seenB: BusMessage[] = [];
    pair.a.subscribe((m) => seenA.push(m));
    pair.b.subscribe((m) => seenB.push(m));
    const message: BusMessage = { type: 'agent', integrationId: 'c2c_x', memberId: 'mem_y', version: 7 };
    pair.a.publish(message);
    await waitFor(() => seenA.length > 0 && seenB.length > 0);
    expect(seenA).toContainEqual(message);
    expect(seenB).toContainEqual(message);
    expect(pair.a.state()).toBe('up');
  });

  it('delivers a room event emitted on one node to a socket connected to another node', async () => {
    const pair = await open();
    opened.push(pair);
    const { uws } = loadUws(false);
    const app = uws.App();
    pair.b.io.attachApp(app);
    pair.b.io.on('connection', (socket) => void socket.join('agent:c2c_x:mem_relay'));
    const listen = await new Promise<any>((resolve) => app.listen('127.0.0.1', 0, resolve));
    const client = connect(`http://127.0.0.1:${uws.us_socket_local_port(listen)}`, { transports: ['websocket'], reconnection: false, forceNew: true });
    try {
      await new Promise<void>((resolve) => client.on('connect', () => resolve()));
      const received = new Promise((resolve) => client.on('state', resolve));
      // The adapter subscribes to a room's channel when the room is created: wait until Redis has it.
      // (The room is named as an agent's is: one of 20 characters looks like a socket id to the
      // sharded adapter, which then sends to it on the namespace's channel, which every node hears.)
      await waitFor(() => pair.b.io.sockets.adapter.rooms.has('agent:c2c_x:mem_relay'));
      await pair.b.roomsJoined();
      const relayedBefore = [pair.a.relayedCount(), pair.b.relayedCount()];
      pair.a.io.to('agent:c2c_x:mem_relay').emit('state', { version: 42 });
      expect(await received).toEqual({ version: 42 });
      // counted where it arrived from another node (/metrics c2c_pushes_relayed_total); one process relays nothing
      const relayed = () => [pair.a.relayedCount() - relayedBefore[0]!, pair.b.relayedCount() - relayedBefore[1]!];
      if (name === 'redis') await waitFor(() => relayed()[1]! > 0, 2000).catch(() => undefined);
      expect(relayed()).toEqual(name === 'redis' ? [0, 1] : [0, 0]);
    } finally {
      client.close();
      uws.us_listen_socket_close(listen);
    }
  });

  it('stops delivering to an unsubscribed handler', async () => {
    const pair = await open();
    opened.push(pair);
    const seen: BusMessage[] = [];
    const stop = pair.b.subscribe((m) => seen.push(m));
    stop();
    const control: BusMessage[] = [];
    pair.b.subscribe((m) => control.push(m));
    pair.a.publish({ type: 'platform', disabled: false });
    await waitFor(() => control.length > 0);
    expect(seen).toEqual([]);
  });
});

/** A socket.io-client socket on a uWS app the bus's server is attached to (as a gateway's is), in `room`. */
async function socketOn(bus: Bus, room: string) {
  const { uws } = loadUws(false);
  const app = uws.App();
  bus.io.attachApp(app);
  bus.io.on('connection', (socket) => void socket.join(room));
  const listen = await new Promise<any>((resolve) => app.listen('127.0.0.1', 0, resolve));
  const client = connect(`http://127.0.0.1:${uws.us_socket_local_port(listen)}`, { transports: ['websocket'], reconnection: false, forceNew: true });
  const events: Array<{ event: string; payload: unknown }> = [];
  client.onAny((event, payload) => events.push({ event, payload }));
  client.on('disconnect', (reason) => events.push({ event: 'disconnect', payload: reason }));
  await new Promise<void>((resolve) => client.on('connect', () => resolve()));
  await waitFor(() => bus.io.sockets.adapter.rooms.has(room));
  await bus.roomsJoined();
  return {
    client,
    events,
    close() {
      client.close();
      uws.us_listen_socket_close(listen);
    },
  };
}

describe("the bus's channels on a Redis database", () => {
  it('carry its number, read as ioredis reads it (the path, else ?db=); database 0 keeps the plain names', () => {
    expect(busChannels('redis://127.0.0.1:6379')).toEqual({ bus: BUS_CHANNEL, adapterPrefix: 'c2c' });
    expect(busChannels('redis://127.0.0.1:6379/0')).toEqual({ bus: BUS_CHANNEL, adapterPrefix: 'c2c' });
    expect(busChannels('redis://127.0.0.1:6379/3')).toEqual({ bus: 'c2c-db3:bus', adapterPrefix: 'c2c-db3' });
    expect(busChannels('rediss://user:pw@redis.example:6380?db=2')).toEqual({ bus: 'c2c-db2:bus', adapterPrefix: 'c2c-db2' });
  });
});

describe.skipIf(!url)('Redis bus, what crosses nodes', () => {
  it("leaves the other nodes' sockets connected when a node closes (a rolling deploy stops one node at a time)", async () => {
    const [a, b, c] = [await createRedisBus(url!), await createRedisBus(url!), await createRedisBus(url!)];
    const onB = await socketOn(b, 'agent:c2c_x:mem_stays');
    try {
      await a.close();
      await new Promise((resolve) => setTimeout(resolve, 200)); // what the close sent has reached B
      c.io.to('agent:c2c_x:mem_stays').emit('state', { version: 3 });
      await waitFor(() => onB.events.some((e) => e.event === 'state'));
      expect(onB.events).toEqual([{ event: 'state', payload: { version: 3 } }]);
      expect(onB.client.connected).toBe(true);
    } finally {
      onB.close();
      await b.close();
      await c.close();
    }
  });

  it('hears other nodes from the moment its start returns: a broadcast sent then reaches it', async () => {
    // on a database of its own: what other suites broadcast on database 0 would count here too
    const dbUrl = new URL(url!);
    dbUrl.pathname = '/4';
    const a = await createRedisBus(dbUrl.toString());
    const b = await createRedisBus(dbUrl.toString());
    try {
      // to two rooms at once: on the namespace's channel, which a node subscribes to as it starts
      a.io.to(['agent:c2c_x:mem_one', 'agent:c2c_x:mem_two']).emit('state', { version: 1 });
      await waitFor(() => b.relayedCount() > 0, 2000).catch(() => undefined);
      expect(b.relayedCount()).toBe(1);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('keeps deployments on different Redis databases apart (pub/sub ignores the database number)', async () => {
    const on = (db: number) => {
      const dbUrl = new URL(url!);
      dbUrl.pathname = `/${db}`;
      return createRedisBus(dbUrl.toString());
    };
    const [staging, stagingToo, production] = [await on(1), await on(1), await on(2)];
    const seen: Record<string, BusMessage[]> = { stagingToo: [], production: [] };
    stagingToo.subscribe((m) => seen.stagingToo!.push(m));
    production.subscribe((m) => seen.production!.push(m));
    const onProduction = await socketOn(production, 'agent:c2c_x:mem_apart');
    try {
      staging.publish({ type: 'platform', disabled: true });
      staging.io.to('agent:c2c_x:mem_apart').emit('state', { version: 9 });
      await waitFor(() => seen.stagingToo!.length > 0);
      await new Promise((resolve) => setTimeout(resolve, 200)); // time for anything to reach production too
      expect(seen.stagingToo).toEqual([{ type: 'platform', disabled: true }]);
      expect(seen.production).toEqual([]);
      expect(onProduction.events).toEqual([]);
    } finally {
      onProduction.close();
      for (const bus of [staging, stagingToo, production]) await bus.close();
    }
  });

  it("ignores a message of another shape on the adapter's channels, and goes on delivering", async () => {
    const [a, b] = [await createRedisBus(url!), await createRedisBus(url!)];
    const onB = await socketOn(b, 'agent:c2c_x:mem_stray');
    const crashes: unknown[] = [];
    const note = (error: unknown) => crashes.push(error);
    process.on('uncaughtException', note);
    process.on('unhandledRejection', note);
    const stray = await connectedRedis(url!, 'c2c-test-stray');
    try {
      // a broadcast without its data, on the channel every node holds and on the room's own
      for (const channel of ['c2c#/#', 'c2c#/#agent:c2c_x:mem_stray#']) {
        for (const text of ['{"uid":"x","nsp":"/","type":3}', 'null', '{"uid":"x","nsp":"/","type":7}', '{"uid":"x","nsp":"/","type":3,"data":{}}']) {
          await stray.call('SPUBLISH', channel, text);
        }
      }
      a.io.to('agent:c2c_x:mem_stray').emit('state', { version: 4 });
      await waitFor(() => onB.events.some((e) => e.event === 'state'));
      expect(onB.events).toEqual([{ event: 'state', payload: { version: 4 } }]);
      expect(crashes).toEqual([]);
    } finally {
      process.off('uncaughtException', note);
      process.off('unhandledRejection', note);
      stray.disconnect();
      onB.close();
      await a.close();
      await b.close();
    }
  });


  it('keeps engine work on the node that published it; everything else reaches the other nodes', async () => {
    const a = await createRedisBus(url!);
    const b = await createRedisBus(url!);
    const onA: BusMessage[] = [];
    const onB: BusMessage[] = [];
    a.subscribe((m) => onA.push(m));
    b.subscribe((m) => onB.push(m));
    a.publish({ type: 'engine', engineId: 'eng_local', reason: 'work', work: { commands: [], dial_requests: [] } });
    a.publish({ type: 'engine', engineId: 'eng_local', reason: 'closed' });
    // One channel, in order: once the closing reached B, the work before it would have too.
    const ours = (messages: BusMessage[]) => messages.filter((m) => m.type === 'engine' && m.engineId === 'eng_local').map((m) => m.type === 'engine' && m.reason);
    await waitFor(() => ours(onB).includes('closed'), 5000);
    expect(ours(onB)).toEqual(['closed']);
    expect(ours(onA)).toEqual(['work', 'closed']);
    await a.close();
    await b.close();
  });
});

/**
 * A TCP proxy in front of the Redis on `port`, which holds chunks as `delay` says (ms; 0 passes at
 * once; 'cut' drops the chunk and the connection), in order per direction: `up` is what a client
 * sends, `down` what Redis answers; `name` is the connection's name once its CLIENT SETNAME went by
 * (c2c-bus-sub, …).
 */
async function redisProxy(port: number, delay: (direction: 'up' | 'down', chunk: Buffer, name: string | null) => number | 'cut') {
  const links = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connectTo(port, '127.0.0.1');
    links.add(client);
    let name: string | null = null;
    const queues = { up: Promise.resolve(), down: Promise.resolve() };
    const forward = (direction: 'up' | 'down', chunk: Buffer, to: Socket) => {
      const ms = delay(direction, chunk, name);
      if (ms === 'cut') return end();
      queues[direction] = queues[direction].then(() => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined)).then(() => void to.write(chunk));
    };
    client.on('data', (chunk: Buffer) => {
      name ??= /setname\r\n\$\d+\r\n([\w-]+)/i.exec(chunk.toString('latin1'))?.[1] ?? null;
      forward('up', chunk, upstream);
    });
    upstream.on('data', (chunk: Buffer) => forward('down', chunk, client));
    const end = () => {
      client.destroy();
      upstream.destroy();
      links.delete(client);
    };
    for (const side of [client, upstream]) side.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxyPort = (server.address() as AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${proxyPort}`,
    /** stops listening for `ms` (connections are refused), then listens on the same port again */
    refuseFor(ms: number) {
      server.close();
      setTimeout(() => server.listen(proxyPort, '127.0.0.1'), ms);
    },
    /** cuts every connection through it (a network blip) */
    cut: () => links.forEach((link) => link.destroy()),
    close() {
      links.forEach((link) => link.destroy());
      server.close();
    },
  };
}

describe.skipIf(!url)('Redis bus faults', () => {
  /** Two buses on a Redis server of the test's own, what B hears, and a way to drop their connections of one name. */
  async function pairOnOwnRedis() {
    const port = await freePort();
    const server = spawnRedis(port);
    await server.start();
    const own = `redis://127.0.0.1:${port}`;
    const a = await createRedisBus(own);
    const b = await createRedisBus(own);
    const admin = await connectedRedis(own, 'c2c-test-admin');
    const heardOnB: Array<{ message: BusMessage; local: boolean }> = [];
    b.subscribe((message, { local }) => heardOnB.push({ message, local }));
    return {
      a,
      b,
      admin,
      /** whether B heard resync, from itself (`local`) or from another node */
      resyncOnB: (local: boolean) => heardOnB.some((heard) => heard.message.type === 'resync' && heard.local === local),
      /** whether B heard a message of this type */
      heardOnB: (type: BusMessage['type']) => heardOnB.some((heard) => heard.message.type === type),
      async drop(name: string) {
        const list = String(await admin.call('CLIENT', 'LIST'));
        const ids = [...list.matchAll(/^id=(\d+) .*? name=(\S+)/gm)].filter((match) => match[2] === name).map((match) => match[1]!);
        expect(ids.length).toBe(2);
        for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id);
      },
      async close() {
        admin.disconnect();
        await a.close();
        await b.close();
        await server.stop();
      },
    };
  }

  it('leaves no connection open when its start fails (Redis refuses its subscription): an embedder that goes on is not held', async () => {
    const port = await freePort();
    const server = spawnRedis(port);
    await server.start();
    const admin = await connectedRedis(`redis://127.0.0.1:${port}`, 'c2c-test-admin');
    try {
      // a user Redis lets do anything but subscribe
      await admin.call('ACL', 'SETUSER', 'nosub', 'on', '>pw', '~*', '&*', '+@all', '-subscribe');
      await expect(createRedisBus(`redis://nosub:pw@127.0.0.1:${port}`)).rejects.toThrow(/NOPERM|permission/i);
      const others = async () => String(await admin.call('CLIENT', 'LIST')).split('\n').filter((line) => line.includes(' user=nosub ')).length;
      await vi.waitFor(async () => expect(await others()).toBe(0), { timeout: 5_000 });
    } finally {
      admin.disconnect();
      await server.stop();
    }
  });

  it('survives a killed connection, reports resync, and delivers again', async () => {
    // On a Redis of its own: killing every subscriber of the shared one would cut other suites' buses.
    const pair = await pairOnOwnRedis();
    try {
      await pair.admin.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
      await waitFor(() => pair.resyncOnB(true), 5000);
      await waitFor(() => pair.b.state() === 'up' && pair.a.state() === 'up', 5000);
      pair.a.publish({ type: 'platform', disabled: true });
      await waitFor(() => pair.heardOnB('platform'), 5000);
    } finally {
      await pair.close();
    }
  });

  it("reports resync when only the socket adapter's subscriber was dropped (pushes to rooms here may have been lost)", async () => {
    const pair = await pairOnOwnRedis();
    try {
      await pair.drop('c2c-adapter-sub');
      await waitFor(() => pair.resyncOnB(true), 5000);
      expect(pair.b.state()).toBe('up');
    } finally {
      await pair.close();
    }
  });

  it("tells every node to resync when a node's publisher was dropped (what it published meanwhile was lost)", async () => {
    const pair = await pairOnOwnRedis();
    try {
      await pair.drop('c2c-bus-pub');
      // from node A: B's own subscriber never dropped, yet B hears it
      await waitFor(() => pair.resyncOnB(false), 5000);
    } finally {
      await pair.close();
    }
  });

  /** A's re-SUBSCRIBE to the bus channel, as the proxy sees it go up. */
  const subscribing = new RegExp(`subscribe\\r\\n\\$\\d+\\r\\n${BUS_CHANNEL}`, 'i');

  /**
   * On a Redis of the test's own: node A behind a proxy whose `rule` decides, chunk by chunk, what
   * reaches Redis (redisProxy's `delay`), node B connected directly, and what A hears. `run` gets
   * them; everything is closed after it.
   */
  async function behindProxy(
    rule: (direction: 'up' | 'down', chunk: Buffer, name: string | null, proxy: { refuseFor(ms: number): void }) => number | 'cut',
    run: (nodes: { a: Bus; b: Bus; heardOnA: BusMessage[]; cut: () => void }) => Promise<void>,
  ) {
    const port = await freePort();
    const server = spawnRedis(port);
    await server.start();
    const proxy = await redisProxy(port, (direction, chunk, name) => rule(direction, chunk, name, proxy));
    const a = await createRedisBus(proxy.url);
    const b = await createRedisBus(`redis://127.0.0.1:${port}`);
    try {
      const heardOnA: BusMessage[] = [];
      a.subscribe((message) => heardOnA.push(message));
      await run({ a, b, heardOnA, cut: proxy.cut });
    } finally {
      await a.close();
      await b.close();
      proxy.close();
      await server.stop();
    }
  }

  it('counts a node back, and resyncs it, only once Redis has taken its subscriptions again: a message published just after reaches it', async () => {
    // Once armed, the proxy holds A's re-SUBSCRIBE to the bus channel for a while (one slow round
    // trip, a busy Redis).
    let holding = false;
    await behindProxy(
      (direction, chunk) => (holding && direction === 'up' && subscribing.test(chunk.toString('latin1')) ? 500 : 0),
      async ({ a, b, heardOnA, cut }) => {
        holding = true;
        cut(); // a network blip on A's connections
        await waitFor(() => heardOnA.some((m) => m.type === 'resync'), 5000);
        expect(a.state()).toBe('up');
        // What A reads after its resync is current until it hears otherwise: it must hear this.
        b.publish({ type: 'integration', integrationId: 'int_changed' });
        await waitFor(() => heardOnA.some((m) => m.type === 'integration'), 3000);
      },
    );
  });

  it('hears other nodes again when its re-SUBSCRIBE was lost with its connection and the next reconnect failed', async () => {
    // Once armed, the proxy drops the connection that carries A's re-SUBSCRIBE to the bus channel,
    // then refuses connections for a while: ioredis gives up the unanswered SUBSCRIBE after a failed
    // reconnect, and renews only subscriptions Redis confirmed.
    let trap = false;
    await behindProxy(
      (direction, chunk, name, proxy) => {
        if (!trap || direction !== 'up' || name !== 'c2c-bus-sub' || !subscribing.test(chunk.toString('latin1'))) return 0;
        trap = false;
        proxy.refuseFor(1500);
        return 'cut';
      },
      async ({ a, b, heardOnA, cut }) => {
        trap = true;
        cut(); // a network blip on A's connections; its re-SUBSCRIBE is lost with the next
        await waitFor(() => !trap && a.state() === 'up' && heardOnA.some((m) => m.type === 'resync'), 10_000);
        b.publish({ type: 'integration', integrationId: 'int_after_the_blip' });
        await waitFor(() => heardOnA.some((m) => m.type === 'integration'), 3000);
      },
    );
  });

  it("confirms a socket's rooms only once the bus messages published before have arrived (a snapshot then reads no stale cache)", async () => {
    const port = await freePort();
    const server = spawnRedis(port);
    await server.start();
    // Node B reaches Redis through a proxy that, once armed, delays what Redis sends B's bus
    // subscriber (a slow link, a busy node): a change's bus message arrives late there.
    let delaying = false;
    const proxy = await redisProxy(port, (direction, _chunk, name) => (delaying && direction === 'down' && name === 'c2c-bus-sub' ? 300 : 0));
    const a = await createRedisBus(`redis://127.0.0.1:${port}`);
    const b = await createRedisBus(proxy.url);
    try {
      const heardOnB: BusMessage[] = [];
      b.subscribe((message) => heardOnB.push(message));
      delaying = true;
      a.publish({ type: 'agent', integrationId: 'c2c_x', memberId: 'mem_late', version: 6 });
      await new Promise((resolve) => setTimeout(resolve, 20)); // Redis has sent it towards B
      await b.roomsJoined();
      expect(heardOnB).toContainEqual(expect.objectContaining({ type: 'agent', memberId: 'mem_late', version: 6 }));
    } finally {
      await a.close();
      await b.close();
      proxy.close();
      await server.stop();
    }
  });

  it('ignores what is not a bus message on its channel (another version, a stray PUBLISH) and goes on delivering', async () => {
    // on a database of its own: other suites' nodes publish on database 0's channel meanwhile
    const dbUrl = new URL(url!);
    dbUrl.pathname = '/7';
    const BUS_CHANNEL = busChannels(dbUrl.toString()).bus;
    const a = await createRedisBus(dbUrl.toString());
    const seen: BusMessage[] = [];
    a.subscribe((m) => seen.push(m));
    const crashes: unknown[] = [];
    const note = (error: unknown) => crashes.push(error);
    process.on('uncaughtException', note);
    const stray = await connectedRedis(url!, 'c2c-test-stray');
    try {
      for (const text of ['null', '{}', '[1]', '"text"', 'not json', '{"node":"x","message":null}']) await stray.publish(BUS_CHANNEL, text);
      await stray.publish(BUS_CHANNEL, JSON.stringify({ node: 'another-node', message: { type: 'platform', disabled: false } }));
      await waitFor(() => seen.some((m) => m.type === 'platform'), 5000);
      expect(seen.filter((m) => m.type !== 'resync')).toEqual([{ type: 'platform', disabled: false }]);
      expect(crashes).toEqual([]);
    } finally {
      process.off('uncaughtException', note);
      stray.disconnect();
      await a.close();
    }
  });
});
