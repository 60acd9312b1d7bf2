/**
 * The simulated provider's legs live in the node that placed them (the claim's or the inbound
 * call's); a hangup, an answer or DTMF may arrive at any node. Across nodes (real Redis) the
 * operation reaches the node holding the leg; on one node, a hangup that lands while the leg is
 * being placed (the voice webhook has answered) keeps it from being placed. Otherwise a hung-up
 * call came back hours later `completed` and billed, and an answer confirmed through another node
 * never connected.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Bus } from '../../api/bus/index.js';
import { createRedisBus } from '../../api/bus/redis.js';
import { openTestDatabase } from '../helpers/databases.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { command, heartbeat, readyAgent, requestCall } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { busReaches, ownRedis } from '../helpers/own-redis.js';
import { waitFor } from '../helpers/processes.js';
import { seedTenant, UK_NUMBER } from '../helpers/tenant.js';

const driver = storeDrivers()[0]!;

const callRow = async (h: Harness, id: string) =>
  (await h.services.db.query<{ status: string; charge_micros: string | null }>('SELECT status, charge_micros FROM call_intents WHERE id = $1', [id]))[0]!;

describe('a simulated call hung up while its leg is being placed (one node)', () => {
  it('is not dialed: it stays canceled and unbilled, whatever time passes', async () => {
    const h = await createHarness(driver);
    try {
      const t = await seedTenant(h.services);
      const api = client(h.app);
      const agent = await readyAgent(api, t);
      const id = (await requestCall(api, t)).body.request_id as string;
      // The moment between the voice webhook's answer (the call is dialing) and the leg's placing:
      // the server key's hangup lands there.
      const simulator = h.services.providers.simulator;
      simulator.attach(async (path, params, signature) => {
        const response = await h.app.inject({
          method: 'POST',
          url: path,
          payload: new URLSearchParams(params).toString(),
          headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
        });
        if (path.startsWith('/api/v1/click2call/provider/voice')) {
          const hungUp = await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
          expect(hungUp.body).toMatchObject({ ok: true, status: 'canceled' });
        }
        return { status: response.statusCode, body: response.body };
      });
      expect((await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
      expect(simulator.liveLegs()).toBe(0);
      await h.clock.advanceSeconds(7200);
      expect(await callRow(h, id)).toEqual({ status: 'canceled', charge_micros: null });
    } finally {
      await h.close();
    }
  });
});

describe.skipIf(!redisUrl())('simulated calls across two nodes (real Redis)', () => {
  const buses: Bus[] = [];
  afterAll(async () => Promise.all(buses.map((bus) => bus.close())));

  async function twoNodes(url = redisUrl()!) {
    const database = await openTestDatabase(driver);
    const [busA, busB] = [await createRedisBus(url), await createRedisBus(url)];
    buses.push(busA, busB);
    const a = await createHarness(driver, {}, { database, bus: busA });
    const b = await createHarness(driver, {}, { database, bus: busB, clock: a.clock });
    return {
      a,
      b,
      async close() {
        await a.close();
        await b.close();
        await database.drop();
      },
    };
  }

  /** An outbound call claimed by a window paired through node A, whose simulator holds its leg. */
  async function callPlacedOn(a: Harness) {
    const t = await seedTenant(a.services);
    const agent = await readyAgent(client(a.app), t);
    const id = (await requestCall(client(a.app), t)).body.request_id as string;
    expect((await client(a.app).post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
    expect(a.services.providers.simulator.liveLegs()).toBe(1);
    return { t, id };
  }

  it('a hangup on node B ends the leg node A placed: the call stays canceled and unbilled', async () => {
    const { a, b, close } = await twoNodes();
    try {
      const { t, id } = await callPlacedOn(a);

      const hungUp = await client(b.app).post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
      expect(hungUp.body).toMatchObject({ ok: true, status: 'canceled' });
      await waitFor(async () => (a.services.providers.simulator.liveLegs() === 0 ? true : undefined), 'the leg on node A to end');
      await a.clock.advanceSeconds(7200);
      expect(await callRow(a, id)).toEqual({ status: 'canceled', charge_micros: null });
    } finally {
      await close();
    }
  });

  it('a hangup on node B while the bus is down answers 502 hangup_uncertain and leaves the call live; asked again once the bus is back, it ends', async () => {
    const redis = await ownRedis();
    const { a, b, close } = await twoNodes(redis.url);
    try {
      const { t, id } = await callPlacedOn(a);

      await redis.stop();
      await busReaches(b.services.bus, 'down', "node B's bus to notice Redis is gone");
      // node B cannot reach node A's leg: "canceled" would be false, the leg ringing on
      const uncertain = await client(b.app).post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
      expect(uncertain.status, JSON.stringify(uncertain.body)).toBe(502);
      expect(uncertain.body.error).toBe('hangup_uncertain');
      expect((await callRow(a, id)).status).toBe('dialing');
      expect(a.services.providers.simulator.liveLegs()).toBe(1);

      await redis.start();
      await busReaches(b.services.bus, 'up', "node B's bus to reconnect");
      await busReaches(a.services.bus, 'up', "node A's bus to reconnect");
      const hungUp = await client(b.app).post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
      expect(hungUp.body).toMatchObject({ ok: true, status: 'canceled' });
      await waitFor(async () => (a.services.providers.simulator.liveLegs() === 0 ? true : undefined), 'the leg on node A to end');
    } finally {
      await close();
      await redis.stop();
    }
  });

  it('an incoming call ringing through node A is answered by a window that acks through node B', async () => {
    const { a, b, close } = await twoNodes();
    try {
      const t = await seedTenant(a.services);
      const agent = await readyAgent(client(a.app), t);
      const rung = await client(a.app).post('/simulated/inbound-calls', { integration_id: t.integrationId, from: UK_NUMBER }, { auth: t.serverKey });
      expect(rung.status, JSON.stringify(rung.body)).toBe(201);
      const id = rung.body.request_id as string;

      const answer = await command(client(b.app), agent.widgetToken, { kind: 'answer', request_id: 'answer-b' });
      expect(answer.body).toMatchObject({ ok: true, status: 'queued' });
      const handed = await heartbeat(client(b.app), agent.engineToken, { call_id: id });
      expect(handed.body.commands).toEqual([expect.objectContaining({ kind: 'answer', call_id: id })]);
      await heartbeat(client(b.app), agent.engineToken, { call_id: id, acks: [{ command_id: answer.body.command_id, result: 'done' }] });
      await waitFor(async () => ((await callRow(a, id)).status === 'connected' ? true : undefined), 'the call to connect');
      // and DTMF sent through node B is heard by the far end of node A's leg
      const digits = await command(client(b.app), agent.widgetToken, { kind: 'dtmf', digits: '42', request_id: 'dtmf-b' });
      await heartbeat(client(b.app), agent.engineToken, { call_id: id });
      await heartbeat(client(b.app), agent.engineToken, { call_id: id, acks: [{ command_id: digits.body.command_id, result: 'done' }] });
      const legSid = (await a.services.db.query<{ provider_call_sid: string }>('SELECT provider_call_sid FROM call_intents WHERE id = $1', [id]))[0]!.provider_call_sid;
      await waitFor(async () => (a.services.providers.simulator.digitsHeard(legSid) === '42' ? true : undefined), 'the digits to be heard');
    } finally {
      await close();
    }
  });
});
