/**
 * The bench's lean Socket.IO client (loadtest/push/wire-client.ts) against the real gateway: the
 * bench's figures are only worth something if its clients do what socket.io-client does — get the
 * snapshot, send commands and read the answers, take pushes and ack them, see refusals with their
 * data, and see the server end them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WireSocket } from '../../loadtest/push/wire-client.js';
import { command, readyAgent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

/** Resolves with the arguments of the next `event` on the socket. */
function next(socket: WireSocket, event: string, timeoutMs = 5000): Promise<any[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within ${timeoutMs} ms`)), timeoutMs);
    let done = false;
    socket.on(event, (...args: any[]) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(args);
    });
  });
}

function ask(socket: WireSocket, event: string, payload: unknown): Promise<any> {
  return new Promise((resolve, reject) => socket.timeout(5000).emit(event, payload, (error, reply) => (error ? reject(error) : resolve(reply))));
}

describe("the bench's wire client on the gateway", () => {
  let live: GatewayHarness;
  let h: Harness;
  let t: Tenant;
  let api: Client;
  let url: string;
  const sockets: WireSocket[] = [];
  const open = (token: string, origin: string) => {
    const socket = new WireSocket(url, { auth: { token }, origin, timeoutMs: 5000 });
    sockets.push(socket);
    return socket;
  };

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
    ({ h, url } = live);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.disconnect();
    await live.close();
  });

  it('connects a widget, gets its snapshot, and gets the answer POST /widget/commands would give', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken, ORIGIN);
    const connected = next(widget, 'connect');
    const snapshot = next(widget, 'state');
    widget.connect();
    await connected;
    expect(widget.connected).toBe(true);
    expect((await snapshot)[0]).toMatchObject({ ok: true, engine: { state: 'ready' } });
    const answer = await ask(widget, 'command', { kind: 'availability', request_id: 'wire-1', available: false });
    expect(answer).toMatchObject({ ok: true, status: 'done' });
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'wire-1', available: false })).body).toEqual(answer);
  });

  it('takes an engine push and acks it', async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    const initial = next(engine, 'work');
    engine.connect();
    expect((await initial)[0]).toEqual({ commands: [], dial_requests: [] });
    const pushed = next(engine, 'work');
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'wire-f1' });
    const [work] = await pushed;
    expect(work.commands.map((c: { command_id: number }) => c.command_id)).toEqual([focus.body.command_id]);
    expect(await ask(engine, 'ack', [{ command_id: focus.body.command_id, result: 'done' }])).toEqual({ ok: true });
    const [row] = await h.services.db.query<{ status: string }>('SELECT status FROM widget_commands WHERE id = $1', [focus.body.command_id]);
    expect(row?.status).toBe('done');
  });

  it('sees a refusal as connect_error with its data, and an ending as ended then disconnect', async () => {
    const agent = await readyAgent(api, t);
    const stranger = open(agent.widgetToken, 'https://evil.example');
    const refused = next(stranger, 'connect_error');
    stranger.connect();
    const [error] = await refused;
    expect(error.data).toMatchObject({ code: 'origin_not_allowed', final: true });
    expect(stranger.connected).toBe(false);

    const widget = open(agent.widgetToken, ORIGIN);
    const snapshot = next(widget, 'state');
    widget.connect();
    await snapshot;
    const ended = next(widget, 'ended');
    const disconnected = next(widget, 'disconnect');
    await api.post('/widget/revoke', undefined, { auth: agent.widgetToken, origin: ORIGIN });
    expect((await ended)[0]).toMatchObject({ code: 'unauthorized', final: true });
    expect(await disconnected).toEqual(['io server disconnect']);
    expect(widget.connected).toBe(false);
    await expect(ask(widget, 'command', { kind: 'focus', request_id: 'late' })).rejects.toThrow('not connected');
  });
});
