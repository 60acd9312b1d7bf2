/**
 * A gateway node that closes (SIGTERM, gateway/server.ts) tells every client to reconnect elsewhere
 * with a retry reason: those it holds, and those whose handshake it was still checking, which
 * connect only after it told the others and stopped the watchers that end sockets.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSession, readyAgent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client } from '../helpers/harness.js';
import { openSocket, request, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

describe('a gateway node closing', () => {
  let live: GatewayHarness;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await live.h.close();
  });

  it('tells its sockets to reconnect elsewhere, the one whose handshake it was checking included', async () => {
    const { h, url, gateway } = live;
    const t = await seedTenant(h.services);
    const api = client(h.app);
    const held = openSocket(url, await openSession(api, t), ORIGIN);
    sockets.push(held);
    await snapshotOf(held);

    const sessions = h.services.sessions;
    const authenticate = sessions.authenticate;
    let release!: () => void;
    const checking = new Promise<void>((resolve) => {
      sessions.authenticate = async (...args) => {
        sessions.authenticate = authenticate;
        resolve();
        await new Promise<void>((go) => (release = go));
        return authenticate.apply(sessions, args);
      };
    });
    try {
      const late = openSocket(url, await openSession(api, t), ORIGIN);
      sockets.push(late);
      await checking;
      const heldEnded = held.next('ended');
      await gateway.close();
      expect(await heldEnded).toMatchObject({ code: 'server_restarting', final: false });

      const lateEnded = late.next('ended');
      const lateGone = late.next('disconnect');
      release();
      expect(await lateEnded).toMatchObject({ code: 'server_restarting', final: false });
      expect(await lateGone).toBe('io server disconnect');
      expect(late.events.map((e) => e.event)).not.toContain('state');
    } finally {
      sessions.authenticate = authenticate;
    }
  });
});

describe('a gateway node stopping, asked for its health', () => {
  it('answers 503 on a connection kept alive from before, so a balancer stops sending clients to it', async () => {
    const live = await createGatewayHarness('pglite');
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const health = () =>
      new Promise<{ status: number; socket: unknown; body: any }>((resolve, reject) => {
        const request = http.get(`${live.url}/healthz`, { agent }, (response) => {
          let text = '';
          response.on('data', (chunk) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode!, socket: request.socket, body: JSON.parse(text) }));
        });
        request.on('error', reject);
      });
    try {
      const before = await health();
      expect(before.status).toBe(200);
      const closing = live.gateway.close();
      const during = await health();
      expect(during.socket).toBe(before.socket); // the same connection
      expect(during).toMatchObject({ status: 503, body: { ok: false, error: 'service_unavailable' } });
      await closing;
    } finally {
      agent.destroy();
      await live.h.close();
    }
  });
});

describe('a gateway node closing with requests under way', () => {
  let live: GatewayHarness;
  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
  });
  afterAll(() => live.h.close());

  it("waits for its sockets' requests under way, answers them, and announces what they change on the bus before the bus closes; it takes up no new ones meanwhile", async () => {
    const { h, url, gateway } = live;
    const t = await seedTenant(h.services);
    const api = client(h.app);
    const agent = await readyAgent(api, t);
    const widget = openSocket(url, agent.widgetToken, ORIGIN);
    await snapshotOf(widget);
    const announced: string[] = [];
    h.services.bus.subscribe((message) => void announced.push(message.type));

    // the command's write is slow (a busy store): it is still under way when the node is told to stop
    const commands = h.services.commands;
    const execute = commands.execute;
    let release!: () => void;
    const started = new Promise<void>((resolve) => {
      commands.execute = async (...args) => {
        resolve();
        await new Promise<void>((go) => (release = go));
        return execute.apply(commands, args);
      };
    });
    try {
      const answered = request(widget.socket, 'command', { kind: 'availability', request_id: 'closing-1', available: false });
      await started;
      let closed = false;
      const ended = widget.next('ended');
      const closing = gateway.close().then(() => void (closed = true));
      // sent once the node is stopping: not taken up here (its sender sends it again elsewhere)
      const late = request(widget.socket, 'command', { kind: 'availability', request_id: 'closing-2', available: true }).then(
        () => 'answered',
        () => 'not answered',
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(closed).toBe(false);
      release();
      await closing;
      // the change was recorded and announced before the node let its bus go, and its answer
      // reached the widget before the socket was told to go
      expect(announced).toContain('agent');
      const recorded = await h.services.db.query<{ request_id: string }>("SELECT request_id FROM widget_commands WHERE request_id LIKE 'closing-%'");
      expect(recorded.map((row) => row.request_id)).toEqual(['closing-1']);
      expect(await answered).toMatchObject({ ok: true, status: 'done' });
      expect(await ended).toMatchObject({ code: 'server_restarting', final: false });
      expect(await late).toBe('not answered');
    } finally {
      commands.execute = execute;
      widget.close();
    }
  });
});
