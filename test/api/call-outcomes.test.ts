/**
 * How outgoing calls end, over HTTP (spec sections 3, 4, 7 and 8): the simulated provider's magic
 * numbers (busy, no answer, failed, long ringing, far-end hangup), the duration caps (policy and
 * wallet share, and what calls already dialed set aside) and their billing, the 502 hangup_uncertain path, intent expiry, a claim that never
 * connects, every engine-dependent refusal of POST /calls, and the Idempotency-Key under concurrency.
 * Each test seeds its own tenant, so live calls and balances never leak from one test to the next.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../shared/limits.js';
import { consumeForDial } from '../../api/domain/calls/dial.js';
import { hangupCall } from '../../api/domain/calls/hangup.js';
import { createReaper } from '../../api/domain/reaper.js';
import type { Db } from '../../api/store/index.js';
import { engineIdentity } from '../../shared/prefixes.js';
import { waitFor } from '../helpers/processes.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import { setMemberOverrides, setPolicy } from '../../api/domain/operator/integrations.js';
import { setRate } from '../../api/domain/operator/telephony.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { command, heartbeat, launchTicket, openSession, readyAgent, requestCall, type Agent } from '../helpers/flows.js';
import { seedTenant, UK_NUMBER, US_NUMBER, type Tenant } from '../helpers/tenant.js';

const BUSY = '+12025550101';
const NO_ANSWER = '+12025550102';
const FAILED = '+12025550103';
const LONG_RINGING = '+12025550104';
const FAR_END_AFTER_5 = '+12025550205';
const UNREACHABLE_ON_HANGUP = '+12025550199';
/** seedTenant's rate for +1, micros per minute */
const US_RATE = 10_000;

describe.each(storeDrivers())('call outcomes on %s', (driver) => {
  let h: Harness;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
  });
  afterAll(() => h.close());

  const deps = () => ({ db: h.services.db, bus: h.services.bus, clock: h.services.clock });
  const nowSeconds = () => Math.floor(h.clock.now() / 1000);

  /** GET /calls/{id} with the tenant's server key; must answer 200. */
  async function getCall(t: Tenant, id: string) {
    const res = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  }

  async function balance(t: Tenant): Promise<number> {
    const [row] = await h.services.db.query<{ balance_micros: number }>('SELECT balance_micros FROM accounts WHERE id = $1', [t.accountId]);
    return Number(row!.balance_micros);
  }

  async function ledgerFor(callId: string) {
    return h.services.db.query<{ amount_micros: number; reason: string }>('SELECT amount_micros, reason FROM wallet_ledger WHERE call_id = $1', [callId]);
  }

  async function intentCount(where: string, params: unknown[]): Promise<number> {
    const [row] = await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM call_intents WHERE ${where}`, params);
    return row!.n;
  }

  /** A new member of the tenant's Sales department (covered by the integration); returns the e-mail. */
  async function salesMember(t: Tenant, name: string): Promise<string> {
    const member = await createMember(deps(), { accountId: t.accountId, email: `${name}@acme.example`, name, departmentId: t.salesId });
    return member.email;
  }

  /** Session → ticket → pair; the engine is not ready until it sends a heartbeat. */
  async function pairOnly(t: Tenant, email: string, simulated: boolean): Promise<Agent> {
    const widgetToken = await openSession(api, t, email);
    const ticket = await launchTicket(api, widgetToken);
    const paired = await api.post('/engine/pair', { ticket, simulated });
    expect(paired.status, JSON.stringify(paired.body)).toBe(201);
    return { widgetToken, engineToken: paired.body.engine_token, engineId: paired.body.engine.id };
  }

  /** A ready window that is not simulated: nothing connects after a claim, as with a real browser that never dials. */
  async function readyRealEngine(t: Tenant, email: string): Promise<Agent> {
    const agent = await pairOnly(t, email, false);
    const beat = await heartbeat(api, agent.engineToken);
    expect(beat.status, JSON.stringify(beat.body)).toBe(200);
    expect(beat.body.engine).toMatchObject({ state: 'ready', mic_ready: true, simulated: false });
    return agent;
  }

  const callAs = (t: Tenant, email: string, body: Record<string, unknown> = {}, key?: string) =>
    requestCall(api, t, { agent: { type: 'email', value: email }, ...body }, key);

  /** A fresh tenant and ready simulated agent; requests a call to `number` and claims it (the simulator dials). */
  async function dialed(number: string, options: { balanceMicros?: number; maxCallSeconds?: number } = {}) {
    const t = await seedTenant(h.services, { balanceMicros: options.balanceMicros });
    if (options.maxCallSeconds !== undefined) await setPolicy(deps(), t.integrationId, { maxCallSeconds: options.maxCallSeconds });
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t, { phone_number: number });
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id: string = requested.body.request_id;
    const claimed = await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
    return { t, agent, id, claimedCall: claimed.body.call, t0: nowSeconds() };
  }

  describe('magic destination numbers', () => {
    it('+12025550101 is busy after 1 s', async () => {
      const { t, id, claimedCall, t0 } = await dialed(BUSY);
      expect(claimedCall.status).toBe('dialing');
      expect(await getCall(t, id)).toMatchObject({ status: 'dialing', error: null, ended_at: null });

      await h.clock.advanceSeconds(1);
      const ended = await getCall(t, id);
      expect(ended).toMatchObject({ status: 'busy', error: 'busy', answered_at: null, ended_at: t0 + 1, duration: 0 });
      expect(await ledgerFor(id)).toHaveLength(0);
      expect(await balance(t)).toBe(100_000_000);
    });

    it('+12025550102 rings, then is no_answer at 31 s', async () => {
      const { t, id, claimedCall, t0 } = await dialed(NO_ANSWER);
      expect(claimedCall.status).toBe('dialing');

      await h.clock.advanceSeconds(1);
      expect(await getCall(t, id)).toMatchObject({ status: 'ringing', ended_at: null });
      await h.clock.advanceSeconds(29);
      expect(await getCall(t, id)).toMatchObject({ status: 'ringing', error: null, ended_at: null });

      await h.clock.advanceSeconds(1);
      expect(await getCall(t, id)).toMatchObject({ status: 'no_answer', error: 'no_answer', answered_at: null, ended_at: t0 + 31, duration: 0 });
      expect(await ledgerFor(id)).toHaveLength(0);
    });

    it('+12025550103 fails at once', async () => {
      const { t, id, claimedCall, t0 } = await dialed(FAILED);
      expect(claimedCall).toMatchObject({ request_id: id, status: 'failed' });
      expect(await getCall(t, id)).toMatchObject({ status: 'failed', error: 'provider_failed', answered_at: null, ended_at: t0, duration: 0 });
      expect(await ledgerFor(id)).toHaveLength(0);
    });

    it('+12025550104 still rings at 20 s and connects at 21 s', async () => {
      const { t, id, t0 } = await dialed(LONG_RINGING);
      await h.clock.advanceSeconds(1);
      expect((await getCall(t, id)).status).toBe('ringing');
      await h.clock.advanceSeconds(19);
      expect(await getCall(t, id)).toMatchObject({ status: 'ringing', answered_at: null });

      await h.clock.advanceSeconds(1);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', answered_at: t0 + 21, ended_at: null, duration: 0 });

      const hangup = await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
      expect(hangup.status, JSON.stringify(hangup.body)).toBe(200);
      expect(hangup.body).toMatchObject({ status: 'completed', ended_at: t0 + 21 });
    });

    it('+12025550205 connects at 3 s and the far end hangs up 5 s later (duration 5)', async () => {
      const { t, id, t0 } = await dialed(FAR_END_AFTER_5);
      await h.clock.advanceSeconds(3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', answered_at: t0 + 3 });
      await h.clock.advanceSeconds(4);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', duration: 4, ended_at: null });

      await h.clock.advanceSeconds(1);
      const ended = await getCall(t, id);
      expect(ended).toMatchObject({ status: 'completed', error: null, answered_at: t0 + 3, ended_at: t0 + 8, duration: 5 });
      const debit = Math.ceil((5 * US_RATE) / 60);
      expect(await balance(t)).toBe(100_000_000 - debit);
      expect((await ledgerFor(id)).map((row) => Number(row.amount_micros))).toEqual([-debit]);
    });
  });

  describe('time limits', () => {
    it('the policy max_call_seconds ends a connected call at 30 s, billed for 30 s', async () => {
      const { t, id, t0 } = await dialed(US_NUMBER, { maxCallSeconds: 30 });
      await h.clock.advanceSeconds(3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', answered_at: t0 + 3 });
      await h.clock.advanceSeconds(29);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', duration: 29 });

      await h.clock.advanceSeconds(1);
      const ended = await getCall(t, id);
      expect(ended).toMatchObject({ status: 'completed', duration: 30, ended_at: t0 + 33 });
      expect(ended.ended_at - ended.answered_at).toBe(30);
      const debit = Math.ceil((30 * US_RATE) / 60);
      expect(await balance(t)).toBe(100_000_000 - debit);
      expect((await ledgerFor(id)).map((row) => Number(row.amount_micros))).toEqual([-debit]);
    });

    it("the wallet's share ends the call at the affordable limit, debited once by ceil(duration × rate / 60)", async () => {
      // 15,200 micros at 10,000 per minute pay for 91.2 s: the provider limit is 91 s.
      const start = 15_200;
      const affordable = Math.floor((start * 60) / US_RATE);
      expect(affordable).toBe(91);
      const { t, id, t0 } = await dialed(US_NUMBER, { balanceMicros: start });
      await h.clock.advanceSeconds(3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', answered_at: t0 + 3 });
      await h.clock.advanceSeconds(affordable - 1);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', duration: affordable - 1 });

      await h.clock.advanceSeconds(1);
      const ended = await getCall(t, id);
      expect(ended).toMatchObject({ status: 'completed', duration: affordable, ended_at: t0 + 3 + affordable });
      const debit = Math.ceil((affordable * US_RATE) / 60);
      expect(debit).toBe(15_167);
      expect(await balance(t)).toBe(start - debit);
      expect(await ledgerFor(id)).toEqual([expect.objectContaining({ reason: 'call' })]);
      expect(Number((await ledgerFor(id))[0]!.amount_micros)).toBe(-debit);

      // A later hangup changes nothing, and what is left pays for less than 60 s.
      const again = await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
      expect(again.status).toBe(200);
      expect(again.body).toMatchObject({ status: 'completed', duration: affordable });
      expect(await balance(t)).toBe(start - debit);
      expect(await ledgerFor(id)).toHaveLength(1);
      await expectError(requestCall(api, t), 402, 'insufficient_balance');
    });
  });

  describe('the wallet shared by calls at once', () => {
    const talking = async (t: Tenant, id: string) => {
      await h.clock.advanceSeconds(3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected' });
    };

    it('a call beside one already dialed plans only on what that one has not set aside, so the balance never goes below zero', async () => {
      // 30,000 micros pay for 180 s alone. The first call, dialed alone, sets all of it aside.
      const { t, id } = await dialed(US_NUMBER, { balanceMicros: 30_000 });
      expect((await h.services.db.query<{ time_limit_seconds: number }>('SELECT time_limit_seconds FROM call_intents WHERE id = $1', [id]))[0]!.time_limit_seconds).toBe(180);
      await talking(t, id);
      const bob = await salesMember(t, 'bob');
      await readyAgent(api, t, bob);
      // Half the balance would have been its share, but the first call may yet spend all of it.
      await expectError(requestCall(api, t, { agent: { type: 'email', value: bob } }), 402, 'insufficient_balance');
      // Both to their limits: the first ends at 180 s, and the balance at zero, not below.
      await h.clock.advanceSeconds(180);
      expect(await getCall(t, id)).toMatchObject({ status: 'completed', duration: 180 });
      expect(await balance(t)).toBe(0);
    });

    it('calls requested together each plan for their share, and together never spend more than the balance', async () => {
      const t = await seedTenant(h.services, { balanceMicros: 30_000 });
      const bob = await salesMember(t, 'bob');
      const ana = await readyAgent(api, t);
      const bobs = await readyAgent(api, t, bob);
      const first = (await requestCall(api, t)).body.request_id as string;
      const second = await requestCall(api, t, { agent: { type: 'email', value: bob }, phone_number: '+12025550124' });
      expect(second.status, JSON.stringify(second.body)).toBe(202);
      expect((await api.post('/engine/claim', { request_id: first }, { auth: ana.engineToken })).status).toBe(200);
      expect((await api.post('/engine/claim', { request_id: second.body.request_id }, { auth: bobs.engineToken })).status).toBe(200);
      const limits = await h.services.db.query<{ time_limit_seconds: number }>('SELECT time_limit_seconds FROM call_intents WHERE account_id = $1 ORDER BY created_at', [t.accountId]);
      expect(limits.map((row) => row.time_limit_seconds)).toEqual([90, 90]);
      await h.clock.advanceSeconds(3 + 90);
      expect(await getCall(t, first)).toMatchObject({ status: 'completed', duration: 90 });
      expect(await getCall(t, second.body.request_id)).toMatchObject({ status: 'completed', duration: 90 });
      expect(await balance(t)).toBe(0);
    });

    it('an inbound call, which is not billed, takes no share of the wallet', async () => {
      // 16,000 micros pay for 96 s: over the 60 s a call needs, unless an inbound call took half.
      const t = await seedTenant(h.services, { balanceMicros: 16_000 });
      const bob = await salesMember(t, 'bob');
      await readyAgent(api, t, bob);
      const inbound = await h.services.calls.injectInbound({ integrationId: t.integrationId, from: '+12025550778' });
      expect(inbound.status).toBe('incoming');
      const ana = await readyAgent(api, t);
      const requested = await requestCall(api, t);
      expect(requested.status, JSON.stringify(requested.body)).toBe(202);
      expect((await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: ana.engineToken })).status).toBe(200);
      expect((await h.services.db.query<{ time_limit_seconds: number }>('SELECT time_limit_seconds FROM call_intents WHERE id = $1', [requested.body.request_id]))[0]!.time_limit_seconds).toBe(96);
    });

    // PGlite runs one statement at a time, so only PostgreSQL can dial two calls of one account at once.
    if (driver === 'pg') {
      it('a call asked for while a dial of its account plans waits for that dial, and is refused when it set everything aside, not accepted to fail', async () => {
        const t = await seedTenant(h.services, { balanceMicros: 30_000 });
        const bob = await salesMember(t, 'bob');
        const ana = await pairOnly(t, t.agent.email, false);
        const bobs = await pairOnly(t, bob, false);
        for (const agent of [ana, bobs]) {
          await api.post('/engine/voice-token', undefined, { auth: agent.engineToken });
          await heartbeat(api, agent.engineToken);
        }
        const first = (await requestCall(api, t)).body.request_id as string;
        expect((await api.post('/engine/claim', { request_id: first }, { auth: ana.engineToken })).status).toBe(200);
        const webhook = (agent: Agent, id: string) => ({ callSid: `CA-${id}`, from: `client:${engineIdentity(agent.engineId)}`, to: id, biz: t.accountId, callerId: '+12025550100' });
        const db = h.services.db;
        let second: ReturnType<typeof requestCall> | undefined;
        // The first dial plans alone (the whole balance); while it holds the account, the second
        // call is asked for, and its request waits for the account.
        const racing: Db = {
          ...db,
          driver: db.driver,
          query: (text, params) => db.query(text, params),
          tx: (fn, options) =>
            db.tx(
              (sql) =>
                fn({
                  query: async (text, params) => {
                    const rows = await sql.query(text, params);
                    if (text.includes('set_aside_micros') && !second) {
                      second = requestCall(api, t, { agent: { type: 'email', value: bob } });
                      await waitFor(async () => ((await lockWaits()) > 0 ? true : undefined), 'the request to wait for the account');
                    }
                    return rows as never;
                  },
                }),
              options,
            ),
          exec: (script) => db.exec(script),
          unavailableCount: () => db.unavailableCount(),
          close: () => db.close(),
        };
        const lockWaits = async () =>
          (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))[0]!.n;
        const dialed = await consumeForDial(racing, h.clock, webhook(ana, first));
        expect(dialed.decision).toMatchObject({ dial: { timeLimitSeconds: 180 } });
        // All 30,000 is set aside for the first call's 180 s: the second is refused when asked for
        // (read before the dial committed, it was accepted, and then failed at its own dial).
        await expectError(second!, 402, 'insufficient_balance');
      });
    }

    it('calls requested beside one dialed earlier share what it did not set aside: each is dialed for the minimum at least, or refused when requested', async () => {
      // 50,000 micros pay for 300 s alone; the policy caps a call at 100 s. The first call, dialed
      // alone, sets 100 s (16,667) aside: more than an equal share once others join it.
      const { t, id } = await dialed(US_NUMBER, { balanceMicros: 50_000, maxCallSeconds: 100 });
      await talking(t, id);
      const others: Array<{ agent: Agent; email: string }> = [];
      for (const name of ['cy', 'di', 'ed', 'fo']) {
        const email = await salesMember(t, name);
        others.push({ agent: await readyAgent(api, t, email), email });
      }
      const requests = [];
      for (const [index, { email }] of others.entries()) requests.push(await requestCall(api, t, { agent: { type: 'email', value: email }, phone_number: `+1202555013${index}` }));
      // The three first plan for 150, 100 and 66 s; the fourth would have 50 s of what is left (33,333 among four): refused now.
      expect(requests.map((request) => request.status)).toEqual([202, 202, 202, 402]);
      expect(requests[3]!.body.error).toBe('insufficient_balance');
      for (const [index, request] of requests.slice(0, 3).entries()) {
        expect((await api.post('/engine/claim', { request_id: request.body.request_id }, { auth: others[index]!.agent.engineToken })).status).toBe(200);
      }
      const dialedCalls = await h.services.db.query<{ time_limit_seconds: number }>(
        `SELECT time_limit_seconds FROM call_intents WHERE account_id = $1 AND id <> $2 AND time_limit_seconds IS NOT NULL ORDER BY created_at`,
        [t.accountId, id],
      );
      // Each gets at least the minimum (the last one dialed used to be left 20 s); together with the first, never more than the balance.
      expect(dialedCalls.map((row) => row.time_limit_seconds).sort()).toEqual([66, 66, 67]);
      const setAside = [100, ...dialedCalls.map((row) => row.time_limit_seconds)].reduce((sum, seconds) => sum + Math.ceil((seconds * US_RATE) / 60), 0);
      expect(setAside).toBeLessThanOrEqual(50_000);
    });

    it('a share is money: a cheaper call asked for after a dearer one waiting to be dialed is refused rather than leave it short; a free one takes no share', async () => {
      // 30,000 micros: 90 s to the UK (20,000 a minute) alone, 45 s if it had to share
      const t = await seedTenant(h.services, { balanceMicros: 30_000 });
      await setRate(deps(), '+1800', 0);
      const ana = await readyAgent(api, t);
      const bob = await salesMember(t, 'bob');
      await readyAgent(api, t, bob);
      const cy = await salesMember(t, 'cy');
      await readyAgent(api, t, cy);
      const dearer = await requestCall(api, t, { phone_number: UK_NUMBER });
      expect(dearer.status, JSON.stringify(dearer.body)).toBe(202);
      // a US call would have 15,000 (90 s at its rate), but the UK call's minute would no longer be paid for
      await expectError(requestCall(api, t, { agent: { type: 'email', value: bob }, phone_number: '+12025550124' }), 402, 'insufficient_balance');
      // a free destination costs nothing and plans for nothing
      const free = await requestCall(api, t, { agent: { type: 'email', value: cy }, phone_number: '+18002752273' });
      expect(free.status, JSON.stringify(free.body)).toBe(202);
      expect((await api.post('/engine/claim', { request_id: dearer.body.request_id }, { auth: ana.engineToken })).status).toBe(200);
      expect(await getCall(t, dearer.body.request_id)).toMatchObject({ status: 'dialing' });
      const [row] = await h.services.db.query<{ time_limit_seconds: number }>('SELECT time_limit_seconds FROM call_intents WHERE id = $1', [dearer.body.request_id]);
      expect(row!.time_limit_seconds).toBe(90);
    });

    it('a call keeps its minimum at its dial when an equal share fell below it but what is not set aside pays for it', async () => {
      // 60,000 micros, UK calls at 20,000 a minute
      const t = await seedTenant(h.services, { balanceMicros: 60_000 });
      const [dee, yan] = [await salesMember(t, 'dee'), await salesMember(t, 'yan')];
      const agents = [await readyAgent(api, t), await readyAgent(api, t, dee), await readyAgent(api, t, yan)];
      const members = await h.services.db.query<{ id: string; email: string }>('SELECT id, email FROM members WHERE account_id = $1', [t.accountId]);
      const idOf = (email: string) => members.find((member) => member.email === email)!.id;
      await setMemberOverrides(deps(), t.integrationId, idOf(t.agent.email), { max_call_seconds: 75 });
      await setMemberOverrides(deps(), t.integrationId, idOf(dee), { max_call_seconds: 30 });
      const call = async (index: number, email: string) => {
        const requested = await requestCall(api, t, { agent: { type: 'email', value: email }, phone_number: `+4420794601${20 + index}` });
        expect(requested.status, JSON.stringify(requested.body)).toBe(202);
        expect((await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agents[index]!.engineToken })).status).toBe(200);
        return requested.body.request_id as string;
      };
      const limitOf = async (id: string) => (await h.services.db.query<{ time_limit_seconds: number }>('SELECT time_limit_seconds FROM call_intents WHERE id = $1', [id]))[0]!.time_limit_seconds;
      // X alone: 75 s (25,000 set aside), talking from 3 s to 78 s; D at 60 s: 30 s (10,000), talking
      // from 63 s to 93 s; Y asked for at 61 s, accepted on 20,000 of the 25,000 not set aside
      const x = await call(0, t.agent.email);
      expect(await limitOf(x)).toBe(75);
      await h.clock.advanceSeconds(60);
      const d = await call(1, dee);
      expect(await limitOf(d)).toBe(30);
      await h.clock.advanceSeconds(1);
      const requested = await requestCall(api, t, { agent: { type: 'email', value: yan }, phone_number: '+442079460199' });
      expect(requested.status, JSON.stringify(requested.body)).toBe(202);
      // X talks to its limit and is billed 25,000: the balance is 35,000, and an equal share of it (17,500) is 52 s
      await h.clock.advanceSeconds(19);
      expect(await getCall(t, x)).toMatchObject({ status: 'completed', duration: 75 });
      expect(await getCall(t, d)).toMatchObject({ status: 'connected' });
      expect(await balance(t)).toBe(35_000);
      // Y is dialed for its minute all the same: 25,000 is not set aside, and Y is the only call waiting for it
      expect((await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agents[2]!.engineToken })).status).toBe(200);
      expect(await getCall(t, requested.body.request_id)).toMatchObject({ status: 'dialing' });
      expect(await limitOf(requested.body.request_id)).toBe(60);
    });

    it('a call the wallet pays for less than the minimum when it is dialed fails at once rather than be cut off seconds in', async () => {
      const t = await seedTenant(h.services, { balanceMicros: 30_000 });
      const agent = await readyAgent(api, t);
      const requested = await requestCall(api, t);
      expect(requested.status).toBe(202);
      // spent elsewhere between the request and the dial: 30 s are left
      await h.services.db.query('UPDATE accounts SET balance_micros = 5000 WHERE id = $1', [t.accountId]);
      expect((await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agent.engineToken })).status).toBe(200);
      expect(await getCall(t, requested.body.request_id)).toMatchObject({ status: 'failed', error: 'insufficient_balance' });
      expect(await balance(t)).toBe(5000);
    });

    it('a call the wallet can no longer pay for when it is dialed fails at once, saying why, not a minute later', async () => {
      const t = await seedTenant(h.services, { balanceMicros: 30_000 });
      const agent = await readyAgent(api, t);
      const requested = await requestCall(api, t);
      expect(requested.status).toBe(202);
      // spent elsewhere between the request and the dial
      await h.services.db.query('UPDATE accounts SET balance_micros = 0 WHERE id = $1', [t.accountId]);
      const claimed = await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agent.engineToken });
      expect(claimed.status).toBe(200);
      expect(await getCall(t, requested.body.request_id)).toMatchObject({ status: 'failed', error: 'insufficient_balance', ended_at: nowSeconds() });
      expect(await balance(t)).toBe(0);
    });
  });

  describe('provider unreachable on hangup', () => {
    it('answers 502 hangup_uncertain to the server key and to the widget, and the call stays connected', async () => {
      const { t, agent, id, t0 } = await dialed(UNREACHABLE_ON_HANGUP);
      await h.clock.advanceSeconds(3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', answered_at: t0 + 3 });

      await expectError(api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey }), 502, 'hangup_uncertain');
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', ended_at: null });

      const first = await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-uncertain-1' }), 502, 'hangup_uncertain');
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', ended_at: null });
      const replay = await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-uncertain-1' }), 502, 'hangup_uncertain');
      expect(replay.body).toEqual(first.body);
      const rows = await h.services.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM widget_commands WHERE request_id = 'hangup-uncertain-1' AND integration_id = $1",
        [t.integrationId],
      );
      expect(rows[0]!.n).toBe(1);

      await h.clock.advanceSeconds(2);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', duration: 2, ended_at: null });
      expect(await ledgerFor(id)).toHaveLength(0);
    });
  });

  describe('provider unreachable when the reaper ends the call of an offline window', () => {
    it('asks the provider again with a widening wait, not on every tick', async () => {
      const { t, id } = await dialed(UNREACHABLE_ON_HANGUP);
      await h.clock.advanceSeconds(3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected' });
      const sid = (await h.services.db.query<{ provider_call_sid: string }>('SELECT provider_call_sid FROM call_intents WHERE id = $1', [id]))[0]!.provider_call_sid;
      const simulator = h.services.providers.simulator;
      // the window says nothing more: 90 s later it is offline, and every tick wants its call ended
      await h.clock.advanceSeconds(LIMITS.engineOfflineAfterSeconds);
      for (let second = 0; second <= 20; second += 1) {
        await h.services.reaper.tick();
        await h.clock.advanceSeconds(1);
      }
      // asked at once, then 2, 4 and 8 s after each failure: 4 times in 21 ticks
      expect(simulator.hangupsAsked(sid)).toBe(1 + 3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', ended_at: null });
    });

    it('shares the claim and the wait between API nodes: two reapers ticking together ask as often as one', async () => {
      const { t, id } = await dialed(UNREACHABLE_ON_HANGUP);
      await h.clock.advanceSeconds(3);
      const sid = (await h.services.db.query<{ provider_call_sid: string }>('SELECT provider_call_sid FROM call_intents WHERE id = $1', [id]))[0]!.provider_call_sid;
      const simulator = h.services.providers.simulator;
      // a second API node on the same store
      const other = createReaper({ db: h.services.db, bus: h.services.bus, clock: h.clock, providers: h.services.providers });
      await h.clock.advanceSeconds(LIMITS.engineOfflineAfterSeconds);
      for (let second = 0; second <= 20; second += 1) {
        await Promise.all([h.services.reaper.tick(), other.tick()]);
        await h.clock.advanceSeconds(1);
      }
      expect(simulator.hangupsAsked(sid)).toBe(1 + 3);
      expect(await getCall(t, id)).toMatchObject({ status: 'connected', ended_at: null });
    });
  });

  describe('calls that never start', () => {
    it('a queued intent nobody claims expires after 60 s, and cannot be claimed then', async () => {
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const requested = await requestCall(api, t);
      expect(requested.status).toBe(202);
      const id: string = requested.body.request_id;
      const createdAt = nowSeconds();
      expect(requested.body.expires_at).toBe(createdAt + 60);

      await h.clock.advanceSeconds(59);
      await h.services.reaper.tick();
      expect(await getCall(t, id)).toMatchObject({ status: 'queued', ended_at: null });

      await h.clock.advanceSeconds(1);
      await h.services.reaper.tick();
      expect(await getCall(t, id)).toMatchObject({ status: 'expired', error: 'expired', ended_at: createdAt + 60, answered_at: null });

      await expectError(api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken }), 404, 'not_found');
      expect((await getCall(t, id)).status).toBe('expired');
    });

    it('an intent claimed by a window whose provider leg never starts fails with connect_timeout after 60 s', async () => {
      const t = await seedTenant(h.services);
      const agent = await readyRealEngine(t, t.agent.email);
      const requested = await requestCall(api, t);
      expect(requested.status).toBe(202);
      const id: string = requested.body.request_id;
      const claimed = await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
      expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
      expect(claimed.body.call.status).toBe('claimed');
      const claimedAt = nowSeconds();

      await h.clock.advanceSeconds(30);
      await heartbeat(api, agent.engineToken, { call_id: id });
      await h.clock.advanceSeconds(29);
      await h.services.reaper.tick();
      expect(await getCall(t, id)).toMatchObject({ status: 'claimed', ended_at: null });

      await h.clock.advanceSeconds(1);
      await h.services.reaper.tick();
      expect(await getCall(t, id)).toMatchObject({ status: 'failed', error: 'connect_timeout', ended_at: claimedAt + 60, answered_at: null });
      expect(await ledgerFor(id)).toHaveLength(0);
    });
  });

  describe('engine-dependent refusals of POST /calls', () => {
    it('agent_offline without a window, and again after the window closes', async () => {
      const t = await seedTenant(h.services);
      await expectError(requestCall(api, t), 409, 'agent_offline');

      const agent = await readyAgent(api, t);
      const closed = await api.post('/engine/close', {}, { auth: agent.engineToken });
      expect(closed.status, JSON.stringify(closed.body)).toBe(200);
      await expectError(requestCall(api, t), 409, 'agent_offline');
      expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(0);
    });

    it('agent_not_ready while the window reports no microphone', async () => {
      const t = await seedTenant(h.services);
      const agent = await pairOnly(t, t.agent.email, true);
      const beat = await heartbeat(api, agent.engineToken, { mic_ready: false });
      expect(beat.status).toBe(200);
      expect(beat.body.engine).toMatchObject({ mic_ready: false, live: true });
      await expectError(requestCall(api, t), 409, 'agent_not_ready');
      expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(0);

      await heartbeat(api, agent.engineToken, { mic_ready: true });
      expect((await requestCall(api, t)).status).toBe(202);
    });

    it('agent_not_ready while the window has a microphone but its voice line is not up (enabling)', async () => {
      const t = await seedTenant(h.services);
      const agent = await pairOnly(t, t.agent.email, true);
      const beat = await heartbeat(api, agent.engineToken, { state: 'enabling', mic_ready: true });
      expect(beat.body.engine).toMatchObject({ state: 'enabling', mic_ready: true, live: true });
      // The window claims calls only once ready: an intent accepted now could only wait and expire.
      const refused = await requestCall(api, t);
      await expectError(refused, 409, 'agent_not_ready');
      expect(refused.body.message).toContain('voice line');
      expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(0);

      await heartbeat(api, agent.engineToken, { state: 'ready', mic_ready: true });
      expect((await requestCall(api, t)).status).toBe(202);
    });

    it('agent_busy while the agent has a queued call', async () => {
      const t = await seedTenant(h.services);
      await readyAgent(api, t);
      const first = await requestCall(api, t, {}, 'busy-first');
      expect(first.status).toBe(202);
      await expectError(requestCall(api, t, { phone_number: '+12025550124' }, 'busy-second'), 409, 'agent_busy');
      await expectError(requestCall(api, t, { phone_number: '+442079460123' }), 409, 'agent_busy');
      expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(1);

      // Once that call is over the agent is free again.
      const canceled = await api.post(`/calls/${first.body.request_id}/hangup`, undefined, { auth: t.serverKey });
      expect(canceled.body).toMatchObject({ status: 'canceled' });
      expect((await requestCall(api, t, { phone_number: '+12025550124' }, 'busy-second')).status).toBe(202);
    });

    it('agent_busy while the window reports busy', async () => {
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const beat = await heartbeat(api, agent.engineToken, { busy: true });
      expect(beat.body.engine).toMatchObject({ state: 'ready', busy: true });
      await expectError(requestCall(api, t), 409, 'agent_busy');
      expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(0);

      await heartbeat(api, agent.engineToken, { busy: false });
      expect((await requestCall(api, t)).status).toBe(202);
    });

    it("concurrency_limit (429) when another agent's call fills the integration's limit", async () => {
      const t = await seedTenant(h.services, { concurrencyLimit: 1 });
      const bea = await salesMember(t, 'bea');
      await readyAgent(api, t);
      await readyAgent(api, t, bea);

      const first = await requestCall(api, t);
      expect(first.status).toBe(202);
      await expectError(callAs(t, bea), 429, 'concurrency_limit');
      expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(1);

      await setPolicy(deps(), t.integrationId, { concurrencyLimit: 2 });
      expect((await callAs(t, bea)).status).toBe(202);
    });
  });

  it('50 Idempotency-Keys × 20 concurrent POST /calls create exactly 50 intents', { timeout: 120_000 }, async () => {
    const KEYS = 50;
    const COPIES = 20;
    const BATCH = 25; // 25 keys × 20 = 500 requests, under 600/min per integration
    // A fresh rate window for the setup requests.
    await h.clock.advanceSeconds(60);
    const t = await seedTenant(h.services, { concurrencyLimit: 100 });

    const emails: string[] = [];
    const engines: string[] = [];
    for (let i = 0; i < KEYS; i++) {
      const email = await salesMember(t, `race${i}`);
      emails.push(email);
      engines.push((await readyRealEngine(t, email)).engineToken);
    }
    const bodyFor = (i: number, phone = US_NUMBER) => ({
      integration_id: t.integrationId,
      agent: { type: 'email', value: emails[i] },
      phone_number: phone,
      display_name: `Contact ${i}`,
    });
    const keyFor = (i: number) => `race-key-${i}`;
    // Each key from its own address: 20 per IP, far under 300/min.
    const post = (i: number, phone?: string) =>
      api.post('/calls', bodyFor(i, phone), { auth: t.serverKey, headers: { 'idempotency-key': keyFor(i) }, ip: `198.51.100.${i + 1}` });
    const keepAlive = async () => {
      for (const token of engines) expect((await heartbeat(api, token)).status).toBe(200);
    };

    const replies: { status: number; body: any }[][] = [];
    for (let from = 0; from < KEYS; from += BATCH) {
      // Per-minute windows reset between batches.
      await h.clock.advanceSeconds(60);
      await keepAlive();
      const batch = await Promise.all(
        Array.from({ length: Math.min(BATCH, KEYS - from) }, (_, k) => Promise.all(Array.from({ length: COPIES }, () => post(from + k)))),
      );
      replies.push(...batch);
    }

    expect(replies).toHaveLength(KEYS);
    const ids = new Set<string>();
    replies.forEach((perKey, i) => {
      const statuses = perKey.map((r) => r.status);
      expect(statuses.filter((s) => s === 202), `key ${i}: ${JSON.stringify(perKey.find((r) => r.status !== 200 && r.status !== 202)?.body)}`).toHaveLength(1);
      expect(statuses.filter((s) => s === 200)).toHaveLength(COPIES - 1);
      const requestIds = new Set(perKey.map((r) => r.body.request_id));
      expect(requestIds.size).toBe(1);
      const [requestId] = [...requestIds];
      expect(requestId).toMatch(/^ci_/);
      ids.add(requestId!);
    });
    expect(ids.size).toBe(KEYS);
    expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(KEYS);
    const stored = await h.services.db.query<{ id: string; idempotency_key: string }>(
      'SELECT id, idempotency_key FROM call_intents WHERE integration_id = $1',
      [t.integrationId],
    );
    const byKey = new Map(stored.map((row) => [row.idempotency_key, row.id]));
    replies.forEach((perKey, i) => expect(byKey.get(keyFor(i))).toBe(perKey[0]!.body.request_id));

    // Afterwards: a replay returns the same intent with 200; another body under the same key is a conflict.
    await h.clock.advanceSeconds(60);
    for (let i = 0; i < KEYS; i++) {
      const again = await post(i);
      expect(again.status, JSON.stringify(again.body)).toBe(200);
      expect(again.body.request_id).toBe(replies[i]![0]!.body.request_id);
    }
    await expectError(post(7, '+12025550124'), 409, 'idempotency_conflict');
    // a body naming another integration is told so (checked first), whether or not its key was used
    const elsewhere = { ...bodyFor(7), integration_id: 'c2c_elsewhere' };
    await expectError(api.post('/calls', elsewhere, { auth: t.serverKey, headers: { 'idempotency-key': keyFor(7) }, ip: '198.51.100.8' }), 403, 'integration_mismatch');
    expect(await intentCount('integration_id = $1', [t.integrationId])).toBe(KEYS);
  });

  it('answers a hangup of a call deleted since it was looked up (the retention pass) as not found, not a 500', async () => {
    await expect(hangupCall(h.services, 'ci_deleted_meanwhile')).rejects.toMatchObject({ code: 'not_found' });
  });
});
