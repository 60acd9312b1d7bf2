/**
 * Clients that do not keep the socket protocol (gateway/guard.ts, gateway/connections.ts), spoken
 * to over the raw long-polling transport where the Socket.IO client would not misbehave: one that
 * never fetches its answers is closed at a bound instead of growing the node without end; one that
 * leaves the namespace does not keep its connection unseen; events a socket does not have, and
 * events with more than one payload, are answered `invalid_request` instead of never.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { MAX_UNREAD_PACKETS, UNREAD_SWEEP_MS } from '../../gateway/guard.js';
import { storeDrivers } from '../helpers/env.js';
import { openSession } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, type Client } from '../helpers/harness.js';
import { waitFor } from '../helpers/processes.js';
import { openSocket, request, snapshotOf } from '../helpers/sockets.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

/** Engine.io's long-polling transport by hand: each POST carries packets, each GET fetches what waits. */
async function pollingSession(url: string, token: string) {
  const base = `${url}/socket.io/?EIO=4&transport=polling`;
  const opened = await fetch(base, { headers: { origin: ORIGIN } });
  const sid = JSON.parse((await opened.text()).slice(1)).sid as string;
  const at = `${base}&sid=${sid}`;
  const post = (packets: string[]) => fetch(at, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'text/plain' }, body: packets.join('\x1e') });
  /** a GET waits for packets up to the ping interval (25 s); a closed session answers 400 at once */
  const get = async () => {
    const answer = await fetch(at, { headers: { origin: ORIGIN }, signal: AbortSignal.timeout(5000) });
    return { status: answer.status, packets: answer.status === 200 ? (await answer.text()).split('\x1e') : [] };
  };
  expect((await post([`40${JSON.stringify({ token })}`])).status).toBe(200);
  // Connected to the namespace, then the snapshot, which follows a store read: it may come with the
  // CONNECT or in a later fetch. Both are read here, so no later fetch finds the snapshot first.
  const first = await get();
  expect(first.packets[0]).toMatch(/^40/);
  const isSnapshot = (packet: string) => packet.startsWith('42["state"');
  if (!first.packets.some(isSnapshot)) expect((await get()).packets.some(isSnapshot)).toBe(true);
  return { post, get };
}

const metric = async (url: string, name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(await (await fetch(`${url}/metrics`)).text())?.[1] ?? 0);

describe.each(storeDrivers())('clients that misbehave, on %s', (driver) => {
  let live: GatewayHarness;
  let api: Client;
  let t: Tenant;

  beforeAll(async () => {
    live = await createGatewayHarness(driver);
    api = client(live.h.app);
    t = await seedTenant(live.h.services);
  });
  afterAll(() => live.close());

  it('closes a long-polling connection that sends requests but never fetches the answers, once a thousand wait', async () => {
    const polling = await pollingSession(live.url, await openSession(api, t));
    const before = await metric(live.url, 'c2c_socket_unread_overflows_total');
    // One request of commands, each answered (refused: no valid payload; then the rate limit) while
    // nothing is fetched, and nothing more is sent: only the node's sweep can find them over the bound.
    const commands = Array.from({ length: MAX_UNREAD_PACKETS + 1 }, (_, i) => `42${i}["command",{}]`);
    expect((await polling.post(commands)).status).toBe(200);
    await waitFor(async () => {
      await live.h.clock.advance(UNREAD_SWEEP_MS);
      return (await metric(live.url, 'c2c_socket_unread_overflows_total')) > before || undefined;
    }, 'the connection closed', 10_000);
    expect((await polling.get()).status).toBe(400); // the session is gone, and what it held with it
    await live.h.clock.advance(60_000); // past the rate limit's window, which the flood used up
    // A client that reads its answers gets each of them, and stays.
    const reader = openSocket(live.url, await openSession(api, t), ORIGIN, { transports: ['polling'] });
    try {
      await snapshotOf(reader);
      for (let i = 0; i < 20; i += 1) {
        expect(await request(reader.socket, 'command', { kind: 'availability', request_id: `r-${i}`, available: true })).toMatchObject({ error: 'invalid_state' });
      }
      expect(reader.socket.connected).toBe(true);
    } finally {
      reader.close();
    }
  });

  it('closes such a connection at once when it sends more while over the bound', async () => {
    const polling = await pollingSession(live.url, await openSession(api, t));
    // events it does not have are answered at once; the node's sweep does not run (the clock stands still)
    const unknown = Array.from({ length: MAX_UNREAD_PACKETS + 10 }, (_, i) => `42${i}["nope",{}]`);
    expect((await polling.post(unknown)).status).toBe(200);
    expect((await polling.get()).status).toBe(400);
  });

  it('closes a WebSocket whose reader stopped once uWS holds more than the bound for it, rather than drop pushes unseen', async () => {
    const ws = new WebSocket(`${live.url.replace('http', 'ws')}/socket.io/?EIO=4&transport=websocket`, { headers: { origin: ORIGIN } });
    const frames: string[] = [];
    ws.on('message', (data) => frames.push(data.toString()));
    const closed = new Promise<void>((resolve) => ws.on('close', () => resolve()));
    await new Promise((resolve) => ws.once('open', resolve));
    ws.send(`40${JSON.stringify({ token: await openSession(api, t) })}`);
    await waitFor(async () => frames.some((frame) => frame.startsWith('42["state"')) || undefined, 'the snapshot', 5000);
    const sid = JSON.parse(frames.find((frame) => frame.startsWith('40'))!.slice(2)).sid as string;
    const socket = live.h.services.bus.io.of('/').sockets.get(sid)!;
    const before = await metric(live.url, 'c2c_socket_unread_overflows_total');

    // The client stops reading; the node goes on pushing, more than the kernel's buffers take.
    (ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const push = 'x'.repeat(2000);
    for (let i = 0; i < 10_000; i += 1) socket.emit('state', push);
    await live.h.clock.advance(UNREAD_SWEEP_MS);
    expect(socket.connected).toBe(false);
    expect(await metric(live.url, 'c2c_socket_unread_overflows_total')).toBe(before + 1);
    // Let go at once, not after a closing handshake queued behind what it does not read: the client
    // learns it when it reads again, and reconnects to the current snapshot.
    (ws as unknown as { _socket: { resume(): void } })._socket.resume();
    await closed;
  });

  it('closes the connection of a client that leaves the namespace, instead of holding it unseen', async () => {
    const polling = await pollingSession(live.url, await openSession(api, t));
    expect((await polling.post(['41'])).status).toBe(200);
    expect((await polling.get()).packets.at(-1)).toBe('1'); // engine.io's close, at once (not at the next ping)
    expect((await polling.get()).status).toBe(400);
  });

  it("answers an event a socket does not have, and one with more than one payload, with invalid_request, running nothing", async () => {
    const token = await openSession(api, t);
    const widget = openSocket(live.url, token, ORIGIN);
    try {
      await snapshotOf(widget);
      expect(await request(widget.socket, 'heartbeat', {})).toMatchObject({ ok: false, error: 'invalid_request', message: expect.stringContaining("no event 'heartbeat'") });
      expect(await request(widget.socket, 'comand', {})).toMatchObject({ ok: false, error: 'invalid_request' });
      // Socket.IO listens to `error` on every socket itself: not an event of ours, nor one to leave unanswered
      const error = await request(widget.socket, 'error', {});
      expect(error).toMatchObject({ ok: false, error: 'invalid_request', message: "A widget socket has no event 'error'; it sends command." });
      const extra = await widget.socket.timeout(5000).emitWithAck('command', { kind: 'availability', request_id: 'x-1', available: false }, 'extra');
      expect(extra).toMatchObject({ ok: false, error: 'invalid_request', message: expect.stringContaining('one payload') });
      const recorded = () => live.h.services.db.query(`SELECT status FROM widget_commands WHERE request_id = 'x-1'`);
      expect(await recorded()).toEqual([]); // nothing ran
      // the same request_id, sent as it should be, runs (and is refused: the agent has no call window)
      expect(await request(widget.socket, 'command', { kind: 'availability', request_id: 'x-1', available: false })).toMatchObject({ error: 'invalid_state' });
      expect(await recorded()).toHaveLength(1);
    } finally {
      widget.close();
    }
  });
});
