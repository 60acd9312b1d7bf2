/**
 * Widget commands are decided on the agent's state as its widgets are shown it (the per-agent
 * cache of api/domain/widget-states.ts, dropped by the bus with every version bump) and recorded
 * with one statement, whose unique request_id finds a replay. A replay is answered from its first
 * record whatever the state since; a new command is decided on the state after every change this
 * node or, once the bus carried it, another node made.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Bus } from '../../api/bus/index.js';
import { createRedisBus } from '../../api/bus/redis.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { command, readyAgent, requestCall } from '../helpers/flows.js';
import { client, createHarness, withTwoNodes } from '../helpers/harness.js';
import { seedTenant } from '../helpers/tenant.js';

const [driver] = storeDrivers();

describe.each(storeDrivers())('widget commands decided on the agent\'s state (%s)', (store) => {
  it('answers a replay from its first record, and decides a new command on the state since', async () => {
    const h = await createHarness(store);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const first = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f1' });
      expect(first.body).toMatchObject({ ok: true, status: 'queued' });

      // the call window closes: its agent has no window any more
      expect((await api.post('/engine/close', {}, { auth: agent.engineToken })).status).toBe(200);
      const replay = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f1' });
      expect(replay.body).toEqual(first.body);
      const fresh = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f2' });
      expect(fresh.body).toMatchObject({ ok: false, error: 'invalid_state' });
      expect((await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f2' })).body).toEqual(fresh.body);
      const rows = await h.services.db.query<{ request_id: string }>('SELECT request_id FROM widget_commands ORDER BY id');
      expect(rows.map((row) => row.request_id)).toEqual(['f1', 'f2']);
    } finally {
      await h.close();
    }
  });
});

describe.each(storeDrivers())('a command naming a call its node has not heard of yet (%s)', (store) => {
  it('is decided on the store, not refused on the cached state: a hang up of a call made on another node whose message is late', async () => {
    // two nodes on one store whose buses do not reach each other: node A never hears of the call
    await withTwoNodes(store, async (a, b) => {
      const t = await seedTenant(a.services);
      const agent = await readyAgent(client(a.app), t);
      // node A has the agent's state in hand: a window, no call
      expect((await command(client(a.app), agent.widgetToken, { kind: 'focus', request_id: 'n1' })).body).toMatchObject({ ok: true });
      const requested = await requestCall(client(b.app), t);
      expect(requested.status, JSON.stringify(requested.body)).toBe(202);
      const id: string = requested.body.request_id;
      const hangup = await command(client(a.app), agent.widgetToken, { kind: 'hangup', request_id: 'n2', ref: id });
      expect(hangup.body).toMatchObject({ ok: true, status: 'done' });
      expect((await client(b.app).get(`/calls/${id}`, { auth: t.serverKey })).body.status).toBe('canceled');
    });
  });
});

describe.skipIf(!redisUrl())('widget commands on one node, state changed on another', () => {
  const buses: Bus[] = [];
  afterAll(async () => Promise.all(buses.map((bus) => bus.close())));

  it('decides on the change once the bus has carried it', async () => {
    const [busA, busB] = [await createRedisBus(redisUrl()!), await createRedisBus(redisUrl()!)];
    buses.push(busA, busB);
    await withTwoNodes(driver!, async (a, b) => {
      const t = await seedTenant(a.services);
      const agent = await readyAgent(client(a.app), t);
      // node A has the agent's state in hand (the window is ready)
      expect((await command(client(a.app), agent.widgetToken, { kind: 'focus', request_id: 'x1' })).body).toMatchObject({ ok: true });

      const heard = new Promise<void>((resolve) =>
        busA.subscribe((message) => {
          if (message.type === 'agent' && message.memberId === t.agent.id) resolve();
        }),
      );
      expect((await client(b.app).post('/engine/close', {}, { auth: agent.engineToken })).status).toBe(200);
      await heard;
      expect((await command(client(a.app), agent.widgetToken, { kind: 'focus', request_id: 'x2' })).body).toMatchObject({ ok: false, error: 'invalid_state' });
    }, { x: busA, y: busB });
  });
});

describe.each(storeDrivers())("a hang up or decline naming the agent's call that ended as it was sent (%s)", (store) => {
  it('is done, as the server key hangup of an ended call is, whether the node has the call in hand or reads it from the store; nothing else is', async () => {
    const h = await createHarness(store);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const statusOf = async (id: string) => (await api.get(`/calls/${id}`, { auth: t.serverKey })).body.status;
      const first: string = (await requestCall(api, t)).body.request_id;
      // the integrator's backend ends the call as the agent clicks Hang up
      expect((await api.post(`/calls/${first}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
      expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'late-1', ref: first })).body).toMatchObject({ ok: true, status: 'done' });
      // an outgoing call was never the agent's to decline (a ring that ended is: webhooks-inbound-commands.test.ts)
      expect((await command(api, agent.widgetToken, { kind: 'decline', request_id: 'late-2', ref: first })).body).toMatchObject({ ok: false, error: 'invalid_state' });
      // the call stays as it ended; the others find no call to act on
      expect(await statusOf(first)).toBe('canceled');
      expect((await command(api, agent.widgetToken, { kind: 'answer', request_id: 'late-3', ref: first })).body).toMatchObject({ ok: false, error: 'invalid_state' });

      // named while a newer call is up (this node reads the older one from the store): done, the newer one untouched
      const second: string = (await requestCall(api, t)).body.request_id;
      expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'late-4', ref: first })).body).toMatchObject({ ok: true, status: 'done' });
      expect(await statusOf(second)).toBe('queued');
      expect((await api.post(`/calls/${second}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
      // naming no call, with none up: still nothing to hang up
      expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'late-5' })).body).toMatchObject({ ok: false, error: 'invalid_state' });
      const rows = await h.services.db.query<{ request_id: string; status: string; call_id: string | null }>('SELECT request_id, status, call_id FROM widget_commands ORDER BY id');
      expect(rows.map(({ request_id, status, call_id }) => [request_id, status, call_id])).toEqual([
        ['late-1', 'done', first],
        ['late-2', 'failed', first],
        ['late-3', 'failed', first],
        ['late-4', 'done', first],
        ['late-5', 'failed', null],
      ]);
    } finally {
      await h.close();
    }
  });
});
