/**
 * The real-time gateway on one node (issue "Real-time gateway"): uWebSockets.js native, handshake
 * authentication and every refusal, pushes of state and work, commands and heartbeats over the
 * socket through the same domain services as REST, and endings the client can act on.
 */
import { connect, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EXPIRY_SWEEP_MS, RECHECK_RETRY, recheck } from '../../gateway/endings.js';
import type { WidgetSocketData } from '../../gateway/handshake.js';
import { loadUws } from '../../gateway/uws.js';
import { SocketLimits } from '../../gateway/limits.js';
import { startGateway } from '../../gateway/server.js';
import { closeIo, createSocketServer } from '../../api/bus/socket-server.js';
import { LIMITS } from '../../shared/limits.js';
import { createMember, updateMember } from '../../api/domain/operator/accounts.js';
import { setCoverage } from '../../api/domain/operator/integrations.js';
import { revokeIntegration } from '../../api/domain/operator/revocation.js';
import { rooms } from '../../api/domain/push.js';
import { storeDrivers } from '../helpers/env.js';
import { command, heartbeat, launchTicket, openSession, readyAgent, requestCall, widgetState } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, type Client, type Harness } from '../helpers/harness.js';
import { freePort, waitFor } from '../helpers/processes.js';
import { advanceUntilEnded, openSocket, request, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe('uWebSockets.js', () => {
  it('loads its native binary (not the JavaScript fallback)', () => {
    expect(loadUws(false).native).toBe(true);
  });
});

describe('Socket.IO', () => {
  // Its timer is not on our clock, so this asserts the setting rather than waiting 10 s.
  it('gives a connection 20 s to be checked in, not its default 45 s', () => {
    const io = createSocketServer();
    try {
      expect(io.connectTimeout()).toBe(20_000);
    } finally {
      closeIo(io);
    }
  });
});

describe.each(storeDrivers())('the gateway on %s', (driver) => {
  let live: GatewayHarness;
  let h: Harness;
  let t: Tenant;
  let api: Client;
  let url: string;
  const sockets: TestSocket[] = [];
  /** origin null: no Origin header at all */
  const open = (token: string, origin: string | null = ORIGIN) => {
    const s = openSocket(url, token, origin ?? undefined);
    sockets.push(s);
    return s;
  };
  const outcome = (s: TestSocket) => Promise.race([s.next('connect').then(() => 'connected' as const), s.next('connect_error')]);

  beforeAll(async () => {
    live = await createGatewayHarness(driver);
    ({ h, url } = live);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await live.close();
  });

  it('refuses to start on a port another gateway holds, rather than share it unannounced', async () => {
    await expect(startGateway(h.services, { port: live.gateway.port, host: '127.0.0.1' })).rejects.toThrow(/cannot listen on 127\.0\.0\.1:\d+ \(HOST, GATEWAY_PORT\): the port is taken/);
  });

  it("answers a load balancer's HEAD /healthz, without a body, and anything but Socket.IO, /healthz and /metrics 404 in the envelope, every answer complete on a kept-alive connection", async () => {
    // Several requests on one connection, one after the other, as a health checker keeping it alive
    // sends them: each is answered in full, so the next one is answered too (a HEAD's without a body).
    const requests = ['HEAD /healthz', 'GET /healthz', 'HEAD /metrics', 'HEAD /', 'GET /', 'POST /healthz/x', 'GET /socket.io.js', 'GET /healthz'];
    const socket = connect(live.gateway.port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    let received = '';
    socket.on('data', (chunk) => void (received += chunk.toString('latin1')));
    const answers: string[] = [];
    try {
      for (const line of requests) {
        received = '';
        socket.write(`${line} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n`);
        // complete: its head, and as many bytes of body as it announced (none for HEAD)
        const complete = () => {
          const end = received.indexOf('\r\n\r\n');
          if (end < 0) return undefined;
          const length = line.startsWith('HEAD') ? 0 : Number(/content-length: (\d+)/i.exec(received)?.[1] ?? 0);
          return received.length >= end + 4 + length ? received : undefined;
        };
        answers.push(await waitFor(async () => complete(), `the answer to ${line}`, 3000));
      }
      // nothing more came after the last answer (a HEAD's body would have)
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(received).toBe(answers.at(-1));
    } finally {
      socket.destroy();
    }
    expect(answers.map((answer) => answer.split('\r\n')[0])).toEqual([
      'HTTP/1.1 200 OK',
      'HTTP/1.1 200 OK',
      'HTTP/1.1 200 OK',
      'HTTP/1.1 404 Not Found',
      'HTTP/1.1 404 Not Found',
      'HTTP/1.1 404 Not Found',
      'HTTP/1.1 404 Not Found',
      'HTTP/1.1 200 OK',
    ]);
    const bodyOf = (answer: string) => answer.slice(answer.indexOf('\r\n\r\n') + 4);
    for (const n of [0, 2, 3]) expect(bodyOf(answers[n]!), requests[n]).toBe('');
    expect(JSON.parse(bodyOf(answers[1]!))).toMatchObject({ ok: true, role: 'gateway' });
    for (const n of [4, 5, 6]) expect(JSON.parse(bodyOf(answers[n]!)), requests[n]).toMatchObject({ ok: false, error: 'not_found' });
    // Socket.IO's own path is not shadowed by the catch-all
    const base = `http://127.0.0.1:${live.gateway.port}`;
    const polling = await fetch(`${base}/socket.io/?EIO=4&transport=polling`, { headers: { origin: ORIGIN } });
    expect(polling.status).toBe(200);
    expect(await polling.text()).toMatch(/^0\{"sid":/);
  });

  it('tells each client it pings every 10 s and gives up on a silent one 10 s later, so a connection that died goes within 20 s', async () => {
    const answer = await fetch(`${url}/socket.io/?EIO=4&transport=polling`, { headers: { origin: ORIGIN } });
    const opening = await answer.text();
    expect(opening[0]).toBe('0'); // engine.io's open packet
    expect(JSON.parse(opening.slice(1))).toMatchObject({ pingInterval: 10_000, pingTimeout: 10_000 });
  });

  it('gives its port back when wiring fails after it listened', async () => {
    const port = await freePort();
    // a node whose bus cannot be reached for its Socket.IO server: wiring throws after the listen
    const broken = Object.create(h.services, { bus: { get: () => { throw new Error('no bus here'); } } }) as typeof h.services;
    await expect(startGateway(broken, { port, host: '127.0.0.1' })).rejects.toThrow('no bus here');
    const server = createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', resolve));
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends a widget the current state on connect, then every change, with rising versions', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    const first = await snapshotOf(widget);
    expect(first).toMatchObject({ ok: true, engine: { state: 'ready' }, call: null, realtime: { available: true } });
    expect(first.session_expires_at).toBeGreaterThan(0);
    const pushed = widget.next('state', { where: (state) => state.version > first.version });
    await command(api, agent.widgetToken, { kind: 'availability', request_id: 'a1', available: false });
    const change = await pushed;
    expect(change.version).toBeGreaterThan(first.version);
    expect(change.engine.available).toBe(false);
    expect(change.session_expires_at).toBeUndefined();
  });

  it('sends changes made in quick succession as rising versions, each once', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    const snapshot = await snapshotOf(widget);
    // Changes at once: each one's push reads the state as it runs, so several read the newest.
    const changes = Array.from({ length: 8 }, (_, i) => command(api, agent.widgetToken, { kind: 'availability', request_id: `burst-${i}`, available: i % 2 === 1 }));
    for (const change of await Promise.all(changes)) expect(change.body).toMatchObject({ ok: true });
    const newest = (await widgetState(api, agent.widgetToken)).body.version;
    expect(newest).toBeGreaterThan(snapshot.version + 1);
    const pushed = () =>
      widget.events
        .filter((event) => event.event === 'state')
        .map((event) => (event.payload as { version: number }).version)
        .filter((version) => version > snapshot.version);
    await waitFor(async () => (pushed().includes(newest) ? true : undefined), 'the newest state');
    expect(pushed()).toEqual([...new Set(pushed())].sort((x, y) => x - y));
  });

  it('takes widget commands over the socket with exactly the REST answer and dedupe', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    await widget.next('connect');
    const first = await request(widget.socket, 'command', { kind: 'availability', request_id: 'sock-1', available: false });
    expect(first).toMatchObject({ ok: true, status: 'done' });
    const replay = await request(widget.socket, 'command', { kind: 'availability', request_id: 'sock-1', available: false });
    expect(replay).toEqual(first);
    const rest = await command(api, agent.widgetToken, { kind: 'availability', request_id: 'sock-1', available: false });
    expect(rest.body).toEqual(first);
    expect(await request(widget.socket, 'command', { kind: 'mute', request_id: 'sock-2' })).toMatchObject({ ok: false, error: 'invalid_state' });
    expect(await request(widget.socket, 'command', { kind: 'dance', request_id: 'sock-3' })).toMatchObject({ ok: false, error: 'invalid_request' });
    // What the store cannot hold is refused as REST refuses it, not failed as internal_error.
    const nul = await request(widget.socket, 'command', { kind: 'focus', request_id: 'sock-\u0000' });
    expect(nul).toMatchObject({ ok: false, error: 'invalid_request', message: expect.stringContaining('NUL') });
    const halfPair = await request(widget.socket, 'command', { kind: 'availability', request_id: 'sock-\ud800', available: true });
    expect(halfPair).toMatchObject({ ok: false, error: 'invalid_request', message: expect.stringContaining('surrogate') });
    // Attachments are refused at sight, not walked byte by byte (which held the node for as long as it took)
    const binary = await request(widget.socket, 'command', { kind: 'availability', request_id: 'sock-4', available: true, extra: [Buffer.alloc(65_000)] });
    expect(binary).toMatchObject({ ok: false, error: 'invalid_request', message: expect.stringContaining('binary') });
  });

  it('lets go of the handshake and of the room named by its id once connected (a browser sends kilobytes of headers), and goes on serving the socket', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    await widget.next('state');
    const held = h.services.bus.io.sockets.sockets.get(widget.socket.id!)!;
    expect((held.conn as unknown as { request: unknown }).request).toBeNull();
    expect(held.handshake).toMatchObject({ headers: {}, query: {}, auth: {}, url: '', time: '' });
    expect([...held.rooms]).toEqual([rooms.agent(t.integrationId, t.agent.id)]);
    expect(await request(widget.socket, 'command', { kind: 'availability', request_id: 'after-release', available: false })).toMatchObject({ ok: true });
    // and a change made over REST still reaches it, through its agent's room
    const pushed = widget.next<{ engine: { available: boolean } }>('state', { where: (state) => state.engine.available });
    await command(api, agent.widgetToken, { kind: 'availability', request_id: 'after-release-rest', available: true });
    expect(await pushed).toMatchObject({ engine: { available: true } });
  });

  it.each(['websocket', 'polling'] as const)('over %s, answers a message as large as a REST body may be, and closes the connection of a larger one', async (transport) => {
    const agent = await readyAgent(api, t);
    const widget = openSocket(url, agent.widgetToken, ORIGIN, { transports: [transport] });
    sockets.push(widget);
    await widget.next('state');
    // the packet's framing (42["command",{"kind":…,"request_id":"…"}] and an ack id) is under 100 bytes
    const padded = (bytes: number) => ({ kind: 'availability', available: true, request_id: 'x'.repeat(bytes - 100) });
    expect(await request(widget.socket, 'command', padded(LIMITS.requestMaxBytes))).toMatchObject({ ok: false, error: 'invalid_request' });
    const closed = widget.next('disconnect');
    widget.socket.emit('command', padded(LIMITS.requestMaxBytes + 200), () => {});
    expect(await closed).toMatch(/^transport (close|error)$/);
  });

  it("pushes to the agent's widgets a command their window acked failed, with the window's reason", async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    const widget = open(agent.widgetToken);
    await snapshotOf(widget);
    const work = engine.next('work', { where: (w: any) => w.commands.length > 0 });
    const sent = await request(widget.socket, 'command', { kind: 'focus', request_id: 'fails-1' });
    expect(sent).toMatchObject({ ok: true, status: 'queued' });
    await work;
    const told = widget.next('state', { where: (state: any) => state.failed_command !== null });
    expect(await request(engine.socket, 'ack', [{ command_id: sent.command_id, result: 'failed', error: 'No window to bring forward.' }])).toEqual({ ok: true });
    expect((await told).failed_command).toMatchObject({ request_id: 'fails-1', kind: 'focus', error: 'command_failed', message: 'No window to bring forward.' });
  });

  it('pushes dial requests and commands to the engine at once; the engine acks them over the socket', async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    const initial = await engine.next('work');
    expect(initial).toEqual({ commands: [], dial_requests: [] });
    const dial = engine.next('work', { where: (w: any) => w.dial_requests.length > 0 });
    const requested = await requestCall(api, t);
    expect((await dial).dial_requests[0].request_id).toBe(requested.body.request_id);
    await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agent.engineToken });
    await h.clock.advanceSeconds(3);
    const work = engine.next('work', { where: (w: any) => w.commands.length > 0 });
    const mute = await command(api, agent.widgetToken, { kind: 'mute', request_id: 'm1' });
    expect(mute.body.status).toBe('queued');
    const pushed = await work;
    expect(pushed.commands[0]).toMatchObject({ kind: 'mute', command_id: mute.body.command_id });
    expect(await request(engine.socket, 'ack', [{ command_id: mute.body.command_id, result: 'done' }])).toEqual({ ok: true });
    const [row] = await h.services.db.query<any>('SELECT status, acks FROM widget_commands WHERE id = $1', [mute.body.command_id]);
    expect(row).toMatchObject({ status: 'done', acks: 1 });
    const beat = await request(engine.socket, 'heartbeat', { state: 'ready', mic_ready: true, muted: true, call_id: requested.body.request_id });
    expect(beat).toMatchObject({ ok: true, engine: { muted: true }, commands: [] });
    await api.post(`/calls/${requested.body.request_id}/hangup`, undefined, { auth: t.serverKey });
  });

  it('hands a window heartbeating over REST (its socket down) every unacked command, even one pushed moments before', async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    const pushed = engine.next('work', { where: (w: any) => w.commands.length > 0 });
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'rest-beat' });
    await pushed;
    // The socket drops before the window could act on the push; it carries on over REST.
    engine.close();
    const beat = await heartbeat(api, agent.engineToken);
    expect(beat.status).toBe(200);
    expect(beat.body.commands.map((c: any) => c.command_id)).toEqual([focus.body.command_id]);
  });

  it('pushes each command once; a heartbeat hands over a command whose ack is overdue, a reconnect every unacked one', async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    const withCommand = () => engine.next('work', { where: (w: any) => w.commands.length > 0 });
    const firstPush = withCommand();
    const f1 = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f1' });
    expect((await firstPush).commands.map((c: any) => c.command_id)).toEqual([f1.body.command_id]);
    // f1 is not acked: the next push carries f2 alone, not f1 again
    const secondPush = withCommand();
    const f2 = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f2' });
    expect((await secondPush).commands.map((c: any) => c.command_id)).toEqual([f2.body.command_id]);
    // f2's ack may still be on the way: a heartbeat right away does not repeat it, one 2.5 s later does
    const beat = (acks: unknown[] = []) => request(engine.socket, 'heartbeat', { state: 'ready', mic_ready: true, call_id: null, acks });
    expect((await beat([{ command_id: f1.body.command_id, result: 'done' }])).commands).toEqual([]);
    await h.clock.advance(LIMITS.redeliverAfterMs - 1);
    expect((await beat()).commands).toEqual([]);
    await h.clock.advance(1);
    expect((await beat()).commands.map((c: any) => c.command_id)).toEqual([f2.body.command_id]);
    engine.close();
    const again = open(agent.engineToken, h.config.siteUrl);
    expect((await again.next('work')).commands.map((c: any) => c.command_id)).toEqual([f2.body.command_id]);
    const [row] = await h.services.db.query<any>('SELECT deliveries FROM widget_commands WHERE id = $1', [f2.body.command_id]);
    expect(row.deliveries).toBe(3);
  });

  it('nudges the window of a ringing inbound call with an empty push, which never carries queued work', async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    // the change names the nudge itself: queued commands (a focus, which a window does not
    // heartbeat for) come in the heartbeat it asks for, never on the nudge
    const published: unknown[] = [];
    const stop = h.services.bus.subscribe((message) => message.type === 'engine' && message.engineId === agent.engineId && published.push(message));
    const nudge = engine.next('work');
    const ringing = await api.post('/simulated/inbound-calls', { integration_id: t.integrationId, from: '+442079460123' }, { auth: t.serverKey });
    stop();
    expect(ringing.status).toBe(201);
    expect(published).toEqual([{ type: 'engine', engineId: agent.engineId, reason: 'work', work: { commands: [], dial_requests: [] }, at: expect.any(Number) }]);
    expect(await nudge).toEqual({ commands: [], dial_requests: [] });
    const beat = await request(engine.socket, 'heartbeat', { state: 'ready', mic_ready: true, call_id: null });
    expect(beat.call).toMatchObject({ request_id: ringing.body.request_id, direction: 'inbound', status: 'incoming' });
    await api.post(`/calls/${ringing.body.request_id}/hangup`, undefined, { auth: t.serverKey });
  });

  it('refuses a widget token from another origin, a server key, an unknown token, and an engine off its pages', async () => {
    const agent = await readyAgent(api, t);
    expect(await open(agent.widgetToken, 'https://evil.example').next('connect_error')).toMatchObject({ code: 'origin_not_allowed', final: true });
    expect(await open(agent.widgetToken, null).next('connect_error')).toMatchObject({ code: 'origin_not_allowed', final: true });
    expect(await open(t.serverKey).next('connect_error')).toMatchObject({ code: 'unauthorized', final: true });
    expect(await open('c2cw_' + 'x'.repeat(48)).next('connect_error')).toMatchObject({ code: 'unauthorized', final: true });
    expect(await open(agent.engineToken, ORIGIN).next('connect_error')).toMatchObject({ code: 'origin_not_allowed', final: true });
  });

  it('takes an engine handshake that names no Origin, as REST does: a same-origin long-polling request (no WebSockets, the gateway behind the site) or no browser', async () => {
    const agent = await readyAgent(api, t);
    const polling = openSocket(url, agent.engineToken, undefined, { transports: ['polling'], headers: { 'sec-fetch-site': 'same-origin' } });
    sockets.push(polling);
    expect(await polling.next('work')).toEqual({ commands: [], dial_requests: [] });
  });

  it('holds a bounded number of sockets per credential on a node: one more is refused rate_limited (retry later), a closed one frees its place', async () => {
    const agent = await readyAgent(api, t);
    const cap = h.services.config.socketsPerCredential;
    const ours = sockets.length;
    const widgets = Array.from({ length: cap + 3 }, () => open(agent.widgetToken));
    const outcomes = await Promise.all(widgets.map(outcome));
    expect(outcomes.filter((o) => o === 'connected')).toHaveLength(cap);
    const refusals = outcomes.filter((o) => o !== 'connected');
    expect(refusals).toHaveLength(3);
    for (const refusal of refusals) expect(refusal).toMatchObject({ code: 'rate_limited', final: false, retry_after: 20 });
    // another credential of the same agent is not held back
    const engine = open(agent.engineToken, h.config.siteUrl);
    expect(await outcome(engine)).toBe('connected');
    const connected = widgets.filter((w) => w.socket.connected);
    connected[0]!.close();
    // its place is free once the gateway saw it go
    await waitFor(async () => {
      const again = open(agent.widgetToken);
      if ((await outcome(again)) === 'connected') return true;
      again.close();
      return undefined;
    }, 'a place freed by a closed socket', 5000);
    expect(await outcome(open(agent.widgetToken))).toMatchObject({ code: 'rate_limited' });
    for (const s of sockets.slice(ours)) s.close();
  });

  it('frees the place of a client that left while its handshake was being checked', async () => {
    const agent = await readyAgent(api, t);
    const cap = h.services.config.socketsPerCredential;
    const ours = sockets.length;
    const held = Array.from({ length: cap - 1 }, () => open(agent.widgetToken));
    expect(new Set(await Promise.all(held.map(outcome)))).toEqual(new Set(['connected']));
    const admissions = vi.spyOn(SocketLimits.prototype, 'admitSocket');
    try {
      // Over raw long-polling: the CONNECT and engine.io's close in one request, so the connection
      // is gone before the credential check (a store read) is done and the socket is admitted.
      const base = `${url}/socket.io/?EIO=4&transport=polling`;
      const sid = JSON.parse((await (await fetch(base, { headers: { origin: ORIGIN } })).text()).slice(1)).sid as string;
      const sent = await fetch(`${base}&sid=${sid}`, {
        method: 'POST',
        headers: { origin: ORIGIN, 'content-type': 'text/plain' },
        body: [`40${JSON.stringify({ token: agent.widgetToken })}`, '1'].join('\x1e'),
      });
      expect(sent.status).toBe(200);
      await waitFor(async () => admissions.mock.results.length > 0 || undefined, 'the left client admitted', 5000);
      expect(admissions.mock.results[0]!.type).toBe('return');
    } finally {
      admissions.mockRestore();
    }
    // its place is free again: one more connects, and then the credential is at its cap
    expect(await outcome(open(agent.widgetToken))).toBe('connected');
    expect(await outcome(open(agent.widgetToken))).toMatchObject({ code: 'rate_limited' });
    for (const s of sockets.slice(ours)) s.close();
  });

  it('counts against the cap the sockets of a credential still connecting, so handshakes that pass together cannot exceed it', () => {
    const limits = new SocketLimits(h.services);
    const cap = h.services.config.socketsPerCredential;
    // two handshakes passed while the credential held cap - 2 sockets: neither is connected yet
    const first = limits.admitSocket('session:s1', cap - 2);
    const second = limits.admitSocket('session:s1', cap - 2);
    expect(() => limits.admitSocket('session:s1', cap - 2)).toThrow(expect.objectContaining({ code: 'rate_limited', retryAfter: 20 }));
    expect(() => limits.admitSocket('engine:e1', cap - 1)).not.toThrow();
    // once connected, they count among those held instead
    first();
    second();
    expect(() => limits.admitSocket('session:s1', cap)).toThrow(expect.objectContaining({ code: 'rate_limited' }));
    expect(() => limits.admitSocket('session:s1', cap - 1)).not.toThrow();
  });

  it('refuses an expired widget token, and ends a connected one at expiry with a retry reason', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    await widget.next('state');
    const ended = widget.next('ended');
    await h.clock.advance(30 * 60 * 1000 - 1);
    expect(await request(widget.socket, 'command', { kind: 'focus', request_id: 'before-expiry' })).toMatchObject({ ok: true });
    expect(widget.events.some((event) => event.event === 'ended')).toBe(false);
    // ended at most EXPIRY_SWEEP_MS after the expiry
    await h.clock.advance(1 + EXPIRY_SWEEP_MS);
    expect(await ended).toMatchObject({ code: 'token_expired', final: false });
    expect(await open(agent.widgetToken).next('connect_error')).toMatchObject({ code: 'unauthorized', final: true });
  });

  it('ends a socket on a refreshed-away token when its grace ends, not at the expiry it was issued with', async () => {
    const agent = await readyAgent(api, t);
    const old = open(agent.widgetToken);
    await old.next('state');
    const refreshedAt = h.clock.now();
    const refreshed = await api.post('/widget/refresh', undefined, { auth: agent.widgetToken, origin: ORIGIN });
    expect(refreshed.status).toBe(200);
    const fresh = open(refreshed.body.widget_token);
    await fresh.next('state');
    // the grace the old token keeps: the socket on it stays (no command is sent on it: a command
    // re-checks the token too, and the refresh alone must bring the ending forward)
    await h.clock.advanceSeconds(LIMITS.widgetTokenRefreshGraceSeconds - 1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(old.events.some((event) => event.event === 'ended')).toBe(false);
    // past it (the sweep comes at most EXPIRY_SWEEP_MS later), the token is dead (REST refuses it),
    // and so is its socket, long before the expiry it was issued with; the one on the new token stays
    expect(await advanceUntilEnded(h.clock, old, EXPIRY_SWEEP_MS)).toMatchObject({ code: 'token_expired', final: false });
    expect(h.clock.now() - refreshedAt).toBeLessThanOrEqual((LIMITS.widgetTokenRefreshGraceSeconds + 3) * 1000);
    expect((await api.get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN })).status).toBe(401);
    expect(await request(fresh.socket, 'command', { kind: 'focus', request_id: 'still-here' })).toMatchObject({ ok: true });
  });

  it('ends with the expiry reason (retry) a widget whose token expires between its handshake and its first snapshot', async () => {
    const agent = await readyAgent(api, t);
    const sessions = h.services.sessions;
    const authenticate = sessions.authenticate;
    sessions.authenticate = async (...args) => {
      sessions.authenticate = authenticate;
      const context = await authenticate.apply(sessions, args);
      await h.clock.advance(30 * 60 * 1000); // the handshake passed on the token's last millisecond
      return context;
    };
    try {
      const widget = open(agent.widgetToken);
      expect(await widget.next('ended')).toMatchObject({ code: 'token_expired', final: false });
      expect(widget.events.map((e) => e.event)).not.toContain('state');
    } finally {
      sessions.authenticate = authenticate;
    }
  });

  it('ends a widget whose token a re-check finds expired with the expiry reason (retry), not a final refusal', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    await widget.next('state');
    // The gateway has not heard that the token's life was cut short (a refresh whose bus message an
    // outage lost): its socket's data still holds a later expiry, so the sweep leaves it be.
    const held = [...h.services.bus.io.of('/').sockets.values()].find((socket) => (socket.data as { token?: string }).token === agent.widgetToken)!;
    (held.data as WidgetSocketData).expiresAt = Number.MAX_SAFE_INTEGER;
    await h.clock.advance(30 * 60 * 1000 + EXPIRY_SWEEP_MS);
    const ended = widget.next('ended');
    await recheck(h.services, [held]);
    expect(await ended).toMatchObject({ code: 'token_expired', final: false });
  });

  it('ends a widget whose session is revoked mid-connection, with a final reason, whichever of its tokens was used', async () => {
    const agent = await readyAgent(api, t);
    const refreshed = await api.post('/widget/refresh', undefined, { auth: agent.widgetToken, origin: ORIGIN });
    const widget = open(refreshed.body.widget_token);
    await widget.next('state');
    const ended = widget.next('ended');
    const disconnected = widget.next('disconnect');
    // Revoked with the token it was refreshed from (still in its grace): the session is one.
    await api.post('/widget/revoke', undefined, { auth: agent.widgetToken, origin: ORIGIN });
    expect(await ended).toMatchObject({ code: 'unauthorized', final: true });
    expect(await disconnected).toBe('io server disconnect');
  });

  it("tells a revoked integration's window it was closed with the integration, not replaced", async () => {
    const revoked = await seedTenant(h.services);
    const agent = await readyAgent(api, revoked);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    const ended = engine.next('ended');
    // The window's ending is announced before the integration's change, whose re-check of the
    // window's credential would end it saying only that it was closed; and before the calls'
    // hangups (one provider request each, a while with many calls), which would give that re-check
    // the time to win.
    const heard: string[] = [];
    const unsubscribe = h.services.bus.subscribe((message) => void heard.push(message.type === 'engine' ? `engine:${message.reason}` : message.type));
    try {
      await revokeIntegration(h.services, revoked.integrationId);
    } finally {
      unsubscribe();
    }
    expect(await ended).toEqual({ code: 'unauthorized', final: true, message: 'This call window was closed (integration_revoked).' });
    expect(heard.indexOf('engine:closed')).toBeGreaterThanOrEqual(0);
    expect(heard.indexOf('session')).toBeGreaterThanOrEqual(0);
    expect(heard.indexOf('engine:closed')).toBeLessThan(heard.indexOf('integration'));
    expect(heard.indexOf('session')).toBeLessThan(heard.indexOf('integration'));
  });

  it("pushes a change of the agent's department to its widgets, and a poll sees it too", async () => {
    const moved = await seedTenant(h.services);
    await setCoverage(h.services, moved.integrationId, { mode: 'departments', inheritFuture: true, departmentIds: [moved.salesId, moved.supportId] });
    const agent = await readyAgent(api, moved);
    const widget = open(agent.widgetToken);
    const first = await widget.next('state');
    expect(first.agent.department).toBe('Sales');
    const polled = await api.get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN });
    const pushed = widget.next('state', { where: (state) => state.version > first.version });
    await updateMember(h.services, moved.agent.id, { departmentId: moved.supportId });
    expect(await pushed).toMatchObject({ agent: { department: 'Support' } });
    const again = await api.get('/widget/state', { auth: agent.widgetToken, origin: ORIGIN, headers: { 'if-none-match': String(polled.headers.etag) } });
    expect(again.status).toBe(200);
    expect(again.body.agent.department).toBe('Support');
  });

  it('ends the old window when a new one replaces it', async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    const ended = engine.next('ended');
    await readyAgent(api, t);
    expect(await ended).toMatchObject({ code: 'replaced', final: true });
  });

  it("ends the socket of a window's token that its pairing, asked again, replaced, and keeps the new token's", async () => {
    const widgetToken = await openSession(api, t);
    const ticket = await launchTicket(api, widgetToken);
    const attempt = 'r'.repeat(20);
    const first = await api.post('/engine/pair', { ticket, simulated: true, attempt });
    expect(first.status).toBe(201);
    const old = open(first.body.engine_token, h.config.siteUrl);
    await old.next('work');
    const ended = old.next('ended');
    const again = await api.post('/engine/pair', { ticket, simulated: true, attempt });
    expect(again.status).toBe(201);
    const renewed = open(again.body.engine_token, h.config.siteUrl);
    await renewed.next('work');
    expect(await ended).toMatchObject({ code: 'unauthorized', final: true });
    expect(renewed.socket.connected).toBe(true);
  });

  it("pushes nothing to a widget whose session was revoked while its handshake was being checked, however long its re-check takes", async () => {
    const agent = await readyAgent(api, t);
    const watcher = open(await openSession(api, t));
    const sessions = h.services.sessions;
    const authenticate = sessions.authenticate;
    let hold: 'handshake' | 'recheck' | null = 'handshake';
    let handshakeChecked!: () => void;
    let recheckStarted!: () => void;
    let releaseHandshake!: () => void;
    let releaseRecheck!: () => void;
    const checked = new Promise<void>((resolve) => (handshakeChecked = resolve));
    const rechecking = new Promise<void>((resolve) => (recheckStarted = resolve));
    sessions.authenticate = async (...args) => {
      if (args[0] !== agent.widgetToken || hold === null) return authenticate.apply(sessions, args);
      if (hold === 'handshake') {
        const context = await authenticate.apply(sessions, args);
        handshakeChecked();
        await new Promise<void>((go) => (releaseHandshake = go));
        return context;
      }
      recheckStarted();
      await new Promise<void>((go) => (releaseRecheck = go));
      return authenticate.apply(sessions, args);
    };
    try {
      const first = await watcher.next('state');
      const widget = open(agent.widgetToken);
      await checked;
      hold = null;
      expect((await api.post('/widget/revoke', undefined, { auth: agent.widgetToken, origin: ORIGIN })).status).toBe(200);
      hold = 'recheck';
      releaseHandshake();
      await rechecking;
      // the agent's state changes while the re-check waits on the store: the agent's other widget hears it
      const changed = watcher.next('state', { where: (state) => state.version > first.version });
      expect((await heartbeat(api, agent.engineToken, { muted: true })).status).toBe(200);
      await changed;
      const ended = widget.next('ended');
      releaseRecheck();
      expect(await ended).toMatchObject({ code: 'unauthorized', final: true });
      expect(widget.events.map((e) => e.event)).not.toContain('state');
    } finally {
      sessions.authenticate = authenticate;
    }
  });

  it("ends a window closed while its socket's handshake was being checked, rather than keep it connected unseen", async () => {
    const agent = await readyAgent(api, t);
    const engines = h.services.engines;
    const authenticate = engines.authenticate;
    let release!: () => void;
    const checked = new Promise<void>((resolve) => {
      // the handshake's check has read the store; its answer is on its way while the window closes
      engines.authenticate = async (token) => {
        const context = await authenticate.call(engines, token);
        engines.authenticate = authenticate;
        resolve();
        await new Promise<void>((go) => (release = go));
        return context;
      };
    });
    try {
      const engine = open(agent.engineToken, h.config.siteUrl);
      await checked;
      expect((await api.post('/engine/close', {}, { auth: agent.engineToken })).status).toBe(200);
      const ended = engine.next('ended');
      const disconnected = engine.next('disconnect');
      release();
      expect(await ended).toMatchObject({ final: true });
      expect(await disconnected).toBe('io server disconnect');
      expect(engine.events.map((e) => e.event)).not.toContain('work');
    } finally {
      engines.authenticate = authenticate;
    }
  });

  it("ends a window's socket whose heartbeat the store refuses as closed, though its cached check still passed (the news of its closing lost)", async () => {
    const agent = await readyAgent(api, t);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await engine.next('work');
    // closed in the store with no bus message: the gateway's cached check of its token still passes
    await h.services.db.query(`UPDATE engines SET state = 'closed', closed_at = $2, close_reason = 'closed', version = version + 1 WHERE id = $1`, [agent.engineId, h.clock.now()]);
    const ended = engine.next('ended');
    const disconnected = engine.next('disconnect');
    expect(await request(engine.socket, 'heartbeat', { state: 'ready', mic_ready: true, call_id: null })).toMatchObject({ ok: false, error: 'unauthorized' });
    expect(await ended).toMatchObject({ code: 'unauthorized', final: true });
    expect(await disconnected).toBe('io server disconnect');
  });

  it('ends sockets of a member who is disabled, with the code of the refusal', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    await widget.next('state');
    const ended = widget.next('ended');
    const { updateMember } = await import('../../api/domain/operator/accounts.js');
    await updateMember({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.agent.id, { enabled: false });
    expect(await ended).toMatchObject({ code: 'agent_disabled', final: true });
    await updateMember({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.agent.id, { enabled: true });
  });

  it('ends the sockets of a removed member as unauthorized and final, and refuses its tokens at the handshake', async () => {
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    const member = await createMember(deps, { accountId: t.accountId, email: `gone-${driver}@acme.example`, name: 'Gone', departmentId: t.salesId });
    const agent = await readyAgent(api, t, member.email);
    const widget = open(agent.widgetToken);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await Promise.all([widget.next('state'), engine.next('work')]);
    const ended = [widget.next('ended'), engine.next('ended')];
    await updateMember(deps, member.id, { removed: true });
    for (const end of await Promise.all(ended)) expect(end).toMatchObject({ code: 'unauthorized', final: true });
    expect(await outcome(open(agent.widgetToken))).toMatchObject({ code: 'unauthorized' });
  });

  it('ends the sockets of a member disabled while the store failed their re-check: a later re-check, or their next request', async () => {
    const agent = await readyAgent(api, t);
    const quiet = open(agent.widgetToken);
    const busy = open(agent.widgetToken);
    await Promise.all([quiet.next('state'), busy.next('state')]);
    // the store does not answer the gateway's re-check (its reads fail from the moment the change is announced)
    const db = h.services.db;
    const query = db.query;
    let failed = 0;
    const stopFailing = h.services.bus.subscribe((message) => {
      if (message.type === 'member')
        db.query = (async () => {
          failed += 1;
          throw new Error('the store is not answering');
        }) as typeof db.query;
    });
    try {
      await updateMember({ db, bus: h.services.bus, clock: h.services.clock }, t.agent.id, { enabled: false });
      // The re-check's first read (the platform's, one read for both sockets) failed: both are unanswered.
      await waitFor(async () => (failed > 0 ? true : undefined), "the gateway's re-check", 10_000);
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      stopFailing();
      db.query = query;
    }
    expect(quiet.events.some((event) => event.event === 'ended')).toBe(false);
    // a request on one is refused, and ends it after its answer
    const ended = busy.next('ended');
    expect(await request(busy.socket, 'command', { kind: 'focus', request_id: 'after-disable' })).toMatchObject({ ok: false, error: 'agent_disabled' });
    expect(await ended).toMatchObject({ code: 'agent_disabled', final: true });
    // the other is checked again a second later
    const quietEnded = quiet.next('ended');
    await h.clock.advance(RECHECK_RETRY.firstMs);
    expect(await quietEnded).toMatchObject({ code: 'agent_disabled', final: true });
    await updateMember({ db, bus: h.services.bus, clock: h.services.clock }, t.agent.id, { enabled: true });
  });

  it('ends the widget and engine sockets of an integration that is disabled, and only those', async () => {
    const otherTenant = await seedTenant(h.services);
    const bystander = open((await readyAgent(api, otherTenant)).widgetToken);
    const bystanderState = bystander.next('state');
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await Promise.all([widget.next('state'), engine.next('work'), bystanderState]);
    const endedWidget = widget.next('ended');
    const endedEngine = engine.next('ended');
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    const { setIntegrationEnabled } = await import('../../api/domain/operator/integrations.js');
    await setIntegrationEnabled(deps, t.integrationId, false);
    try {
      expect(await endedWidget).toMatchObject({ code: 'integration_disabled', final: true });
      expect(await endedEngine).toMatchObject({ code: 'integration_disabled', final: true });
      const answer = await request(bystander.socket, 'command', { kind: 'availability', available: false, request_id: 'bystander-1' });
      expect(answer).toMatchObject({ ok: true, status: 'done' });
    } finally {
      await setIntegrationEnabled(deps, t.integrationId, true);
    }
  });

  it('ends every socket when the platform is disabled, and refuses new ones', async () => {
    const agent = await readyAgent(api, t);
    const widget = open(agent.widgetToken);
    const engine = open(agent.engineToken, h.config.siteUrl);
    await Promise.all([widget.next('state'), engine.next('work')]);
    const endedWidget = widget.next('ended');
    const endedEngine = engine.next('ended');
    await h.services.platform.setDisabled(true);
    expect(await endedWidget).toMatchObject({ code: 'platform_disabled', final: true });
    expect(await endedEngine).toMatchObject({ code: 'platform_disabled', final: true });
    expect(await open(agent.widgetToken).next('connect_error')).toMatchObject({ code: 'platform_disabled', final: true });
    await h.services.platform.setDisabled(false);
  });
});
