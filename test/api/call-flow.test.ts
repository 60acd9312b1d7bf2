/**
 * A full call over HTTP only (issue: Call lifecycle, "Done when"): session → launch ticket →
 * pair (simulated) → ready → POST /calls 202 → dial request on the heartbeat → claim → ringing →
 * connected → widget hangup (its request_id replayed is not executed twice) → completed, with the
 * server's duration and the wallet debited; GET /calls/{id} and GET /widget/state show each step.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WidgetState } from '../../shared/schemas/widget-api.js';
import { storeDrivers } from '../helpers/env.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { command, heartbeat, readyAgent, requestCall, widgetState } from '../helpers/flows.js';
import { expectError } from '../helpers/expect.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('a call end to end on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('goes from request to completed, billed once by the server\'s duration', async () => {
    const agent = await readyAgent(api, t);
    const status = async (id: string) => (await api.get(`/calls/${id}`, { auth: t.serverKey })).body;
    const state = async () => {
      const res = await widgetState(api, agent.widgetToken);
      expect(res.status).toBe(200);
      return WidgetState.parse(res.body);
    };
    const before = await state();
    expect(before.engine).toMatchObject({ state: 'ready', live: true, mic_ready: true, simulated: true, available: true });
    expect(before.call).toBeNull();

    const requested = await requestCall(api, t, { display_name: 'Jo Bloggs', contact_reference: 'crm-42' }, 'order-1');
    expect(requested.status).toBe(202);
    expect(requested.body).toMatchObject({ ok: true, status: 'queued', direction: 'outbound', answered_at: null, duration: 0, orphaned: false });
    expect(requested.body.request_id).toMatch(/^ci_/);
    expect(requested.body.call_id).toBe(requested.body.request_id);
    expect(requested.body.expires_at).toBe(Math.floor(h.clock.now() / 1000) + 60);
    const id = requested.body.request_id;
    const queuedState = await state();
    expect(queuedState.version).toBeGreaterThan(before.version);
    expect(queuedState.call).toMatchObject({ request_id: id, status: 'queued', display: { name: 'Jo Bloggs', contact_reference: 'crm-42', number: '+12025550123' } });

    const beat = await heartbeat(api, agent.engineToken);
    expect(beat.body.dial_requests).toEqual([{ request_id: id, display: expect.objectContaining({ name: 'Jo Bloggs' }), expires_at: requested.body.expires_at }]);

    const claimed = await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    expect(claimed.status).toBe(200);
    expect(claimed.body.connect.params).toEqual({ To: id, Biz: t.accountId, CallerId: '+12025550100' });
    // The simulated engine's claim connects through the simulator: the webhook consumed the intent.
    expect(claimed.body.call.status).toBe('dialing');
    expect((await status(id)).status).toBe('dialing');
    await heartbeat(api, agent.engineToken, { call_id: id });

    await h.clock.advanceSeconds(1);
    expect((await status(id)).status).toBe('ringing');
    expect((await state()).call?.status).toBe('ringing');

    await h.clock.advanceSeconds(2);
    const connected = await status(id);
    expect(connected.status).toBe('connected');
    expect(connected.answered_at).toBe(Math.floor(h.clock.now() / 1000));

    await h.clock.advanceSeconds(30);
    await heartbeat(api, agent.engineToken, { call_id: id });
    await h.clock.advanceSeconds(12);
    const talking = await status(id);
    expect(talking.duration).toBe(42);
    expect((await state()).call).toMatchObject({ status: 'connected', duration: 42, orphaned: false });

    const hangup = await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-1' });
    expect(hangup.status).toBe(200);
    expect(hangup.body).toMatchObject({ ok: true, status: 'done' });
    const replay = await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-1' });
    expect(replay.body).toEqual(hangup.body);
    const executed = await h.services.db.query<{ n: number }>("SELECT count(*)::int AS n FROM widget_commands WHERE request_id = 'hangup-1'");
    expect(executed[0]!.n).toBe(1);

    const ended = await status(id);
    expect(ended).toMatchObject({ status: 'completed', duration: 42, orphaned: false });
    expect(ended.ended_at - ended.answered_at).toBe(42);
    expect((await state()).call).toMatchObject({ status: 'completed', duration: 42 });

    // 42 s at 0.01 per minute = 7000 micros, debited once.
    const [account] = await h.services.db.query<{ balance_micros: number }>('SELECT balance_micros FROM accounts WHERE id = $1', [t.accountId]);
    expect(account!.balance_micros).toBe(10_000_000 - 7000);
    const ledger = await h.services.db.query('SELECT * FROM wallet_ledger WHERE call_id = $1', [id]);
    expect(ledger).toHaveLength(1);

    // Late duplicate callbacks and a second hangup change nothing.
    const again = await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
    expect(again.body.status).toBe('completed');
    const [after] = await h.services.db.query<{ balance_micros: number }>('SELECT balance_micros FROM accounts WHERE id = $1', [t.accountId]);
    expect(after!.balance_micros).toBe(10_000_000 - 7000);
  });

  it("ends the window's call from its own hang-up button, never a colleague's, and says when the provider could not be reached", async () => {
    const own = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    const agent = await readyAgent(api, own);
    const colleague = await createMember(h.services, { accountId: own.accountId, email: 'cole@acme.example', name: 'Cole', departmentId: own.salesId });
    const other = await readyAgent(api, own, colleague.email);
    const connect = async (who: typeof agent, email: string, number?: string) => {
      const requested = await requestCall(api, own, { agent: { type: 'email', value: email }, ...(number && { phone_number: number }) });
      expect(requested.status, JSON.stringify(requested.body)).toBe(202);
      const id: string = requested.body.request_id;
      expect((await api.post('/engine/claim', { request_id: id }, { auth: who.engineToken })).status).toBe(200);
      await h.clock.advanceSeconds(3);
      expect((await api.get(`/calls/${id}`, { auth: own.serverKey })).body.status).toBe('connected');
      return id;
    };
    const hangup = (who: typeof agent, body?: unknown) => api.post('/engine/hangup', body, { auth: who.engineToken });
    const mine = await connect(agent, own.agent.email);
    const theirs = await connect(other, colleague.email);

    // a colleague's call, named: not this window's to end
    expect((await hangup(agent, { call_id: theirs })).body).toEqual({ ok: true, call: null });
    expect((await api.get(`/calls/${theirs}`, { auth: own.serverKey })).body.status).toBe('connected');
    // its own call, unnamed
    await h.clock.advanceSeconds(7);
    const ended = await hangup(agent);
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect(ended.body.call).toMatchObject({ request_id: mine, status: 'completed', duration: 10 });
    // nothing left to end
    expect((await hangup(agent)).body).toEqual({ ok: true, call: null });
    expect((await api.get(`/calls/${theirs}`, { auth: own.serverKey })).body.status).toBe('connected');
    expect((await api.post(`/calls/${theirs}/hangup`, undefined, { auth: own.serverKey })).status).toBe(200);

    // the provider unreachable: 502 hangup_uncertain, and the call goes on
    const uncertain = await connect(agent, own.agent.email, '+12025550199');
    await expectError(hangup(agent, { call_id: uncertain }), 502, 'hangup_uncertain');
    expect((await api.get(`/calls/${uncertain}`, { auth: own.serverKey })).body.status).toBe('connected');
  });
});
