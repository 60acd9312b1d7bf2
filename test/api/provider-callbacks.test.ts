/**
 * Provider status callbacks applied in any order and any interleaving (spec section 3): the final
 * status is decided from the locked row, a `completed` carrying CallDuration means answered even
 * when it overtakes `in-progress`, callbacks only move calls the provider drives along their
 * direction's steps and only for the call's own provider leg, and the voice webhook's retry
 * shortcut answers <Dial> only while the intent is still dialing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { WebhookParams } from '../../api/providers/signature.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, heartbeat, readyAgent, requestCall, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { providerWebhooks, realAgent, requestAndClaim } from '../helpers/provider.js';
import { CALLER_ID, UK_NUMBER, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('provider status callbacks on %s', (driver) => {
  let h: Harness;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
  });
  afterAll(() => h.close());
  beforeEach(() => h.clock.advanceSeconds(61));

  const { signedVoice, signedStatus } = providerWebhooks(() => h, () => api);
  const ts = (ms: number) => new Date(ms).toUTCString();

  async function row(id: string) {
    const [r] = await h.services.db.query<Record<string, any>>('SELECT * FROM call_intents WHERE id = $1', [id]);
    return r!;
  }
  const ledger = (id: string) => h.services.db.query<{ amount_micros: number }>('SELECT amount_micros FROM wallet_ledger WHERE call_id = $1', [id]);

  const voiceParams = (t: Tenant, agent: Agent, intentId: string, callSid: string): WebhookParams => ({
    CallSid: callSid,
    From: `client:c2c_${agent.engineId}`,
    To: intentId,
    Biz: t.accountId,
    CallerId: CALLER_ID,
  });
  /** An outbound call dialed by the voice webhook with parent CallSid `parent`. */
  async function dialed(t: Tenant, agent: Agent, parent: string): Promise<string> {
    const id = await requestAndClaim(api, t, agent);
    expect((await signedVoice(t, voiceParams(t, agent, id, parent))).body).toContain('<Dial');
    return id;
  }

  it('ends an answered call completed and billed when its in-progress and completed callbacks race', async () => {
    const t = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    const agent = await realAgent(api, t);
    for (let i = 0; i < 4; i++) {
      const id = await dialed(t, agent, `CA-race-${i}`);
      await h.clock.advanceSeconds(2);
      const leg = { CallSid: `CA-race-leg-${i}`, ParentCallSid: `CA-race-${i}` };
      // The completed request reads the call while in-progress is being applied.
      const [answered, done] = await Promise.all([
        signedStatus(t, id, { ...leg, CallStatus: 'in-progress' }),
        signedStatus(t, id, { ...leg, CallStatus: 'completed', CallDuration: '0' }),
      ]);
      expect([answered.status, done.status]).toEqual([204, 204]);
      const r = await row(id);
      // Whichever commits last, an answered call never ends unanswered and unbilled.
      if (r.answered_at !== null) {
        expect(r.status, `round ${i}`).toBe('completed');
        expect(await ledger(id)).toHaveLength(1);
      } else {
        // completed won the lock first: the late in-progress cannot reopen it.
        expect(r.status, `round ${i}`).toBe('no_answer');
      }
      await heartbeat(api, agent.engineToken);
    }
  });

  it('decides completed from the locked row: a hangup requested after the route read the call still ends it canceled by hangup', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await dialed(t, agent, 'CA-stale');
    // Deterministic interleaving: right after the status route's own read of the call, a hangup
    // request is recorded (as hangup.ts does) before the callback is applied.
    const db = h.services.db;
    let fired = false;
    h.services.db = new Proxy(db, {
      get(target, prop) {
        if (prop !== 'query') return Reflect.get(target, prop, target);
        return async (text: string, params?: unknown[]) => {
          const rows = await target.query(text, params);
          if (!fired && /FROM call_intents WHERE id = \$1/.test(text)) {
            fired = true;
            await target.query('UPDATE call_intents SET hangup_requested_at = $2 WHERE id = $1', [id, h.clock.now()]);
          }
          return rows;
        };
      },
    });
    try {
      expect((await signedStatus(t, id, { CallSid: 'CA-stale-leg', ParentCallSid: 'CA-stale', CallStatus: 'completed', CallDuration: '0' })).status).toBe(204);
    } finally {
      h.services.db = db;
    }
    expect(fired).toBe(true);
    expect(await row(id)).toMatchObject({ status: 'canceled', end_reason: 'hangup' });
  });

  it('treats a completed with CallDuration > 0 that overtakes in-progress as an answered, billed call', async () => {
    const t = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    const agent = await realAgent(api, t);
    const id = await dialed(t, agent, 'CA-ooo');
    const t0 = h.clock.now();
    await h.clock.advanceSeconds(125);
    const leg = { CallSid: 'CA-ooo-leg', ParentCallSid: 'CA-ooo' };
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'completed', CallDuration: '120', Timestamp: ts(t0 + 125_000) })).status).toBe(204);
    let r = await row(id);
    expect(r).toMatchObject({ status: 'completed', end_reason: 'far_end' });
    expect(Number(r.answered_at)).toBe(t0 + 5_000);
    // 120 s at 0.01 per minute.
    expect((await ledger(id)).map((l) => Number(l.amount_micros))).toEqual([-20_000]);
    // The overtaken callbacks change nothing.
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'ringing', Timestamp: ts(t0 + 1_000) })).status).toBe(204);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: ts(t0 + 5_000) })).status).toBe(204);
    r = await row(id);
    expect(r.status).toBe('completed');
    expect(await ledger(id)).toHaveLength(1);

    // Without a Timestamp the answer moment is the server's now less CallDuration.
    const second = await dialed(t, agent, 'CA-ooo-2');
    await h.clock.advanceSeconds(90);
    await signedStatus(t, second, { CallSid: 'CA-ooo-2-leg', ParentCallSid: 'CA-ooo-2', CallStatus: 'completed', CallDuration: '60' });
    const s = await row(second);
    expect(s.status).toBe('completed');
    expect(Number(s.answered_at)).toBe(h.clock.now() - 60_000);
    expect((await ledger(second)).map((l) => Number(l.amount_micros))).toEqual([-10_000]);
  });

  it('ends and bills a call at the provider\'s time of its end: a completed delivered a minute late is not billed for the minute', async () => {
    const t = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    const agent = await realAgent(api, t);
    const id = await dialed(t, agent, 'CA-late');
    const t0 = h.clock.now();
    const leg = { CallSid: 'CA-late-leg', ParentCallSid: 'CA-late' };
    await h.clock.advanceSeconds(5);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: ts(t0 + 5_000) })).status).toBe(204);
    // the far end hangs up at t0+15; the callback saying so arrives at t0+75
    await h.clock.advanceSeconds(70);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'completed', CallDuration: '10', Timestamp: ts(t0 + 15_000) })).status).toBe(204);
    const r = await row(id);
    expect(r).toMatchObject({ status: 'completed', end_reason: 'far_end' });
    expect([Number(r.answered_at), Number(r.ended_at)]).toEqual([t0 + 5_000, t0 + 15_000]);
    // 10 s at 0.01 per minute, not 70
    expect((await ledger(id)).map((l) => Number(l.amount_micros))).toEqual([-1_667]);
    const shown = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(shown.body.duration).toBe(10);
  });

  it('a hangup that raced the answer: the provider\'s later completed with talk time makes the call completed and billed, once', async () => {
    const t = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    const agent = await realAgent(api, t);
    const id = await dialed(t, agent, 'CA-racing');
    const t0 = h.clock.now();
    const leg = { CallSid: 'CA-racing-leg', ParentCallSid: 'CA-racing' };
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'ringing', Timestamp: ts(t0) })).status).toBe(204);
    await h.clock.advanceSeconds(3);
    // the backend hangs up while it rings; the far end had just picked up
    const hungUp = await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey });
    expect(hungUp.status).toBe(200);
    expect((await row(id)).status).toBe('canceled');
    expect(await ledger(id)).toHaveLength(0);
    await h.clock.advanceSeconds(1);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: ts(t0 + 2_000) })).status).toBe(204);
    expect((await row(id)).status).toBe('canceled'); // an answer alone says nothing of the talk: the final does
    const completed = { ...leg, CallStatus: 'completed', CallDuration: '2', Timestamp: ts(t0 + 4_000) };
    expect((await signedStatus(t, id, completed)).status).toBe(204);
    const r = await row(id);
    expect(r).toMatchObject({ status: 'completed', end_reason: 'hangup' });
    expect([Number(r.answered_at), Number(r.ended_at)]).toEqual([t0 + 2_000, t0 + 4_000]);
    expect((await ledger(id)).map((l) => Number(l.amount_micros))).toEqual([-334]);
    expect((await signedStatus(t, id, completed)).status).toBe(204);
    expect(await ledger(id)).toHaveLength(1);
    expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body).toMatchObject({ status: 'completed', duration: 2 });

    // a call ended before the provider dialed it has no talk to revise, whatever a callback says
    await heartbeat(api, agent.engineToken);
    const undialed = await requestAndClaim(api, t, agent);
    expect((await api.post(`/calls/${undialed}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
    expect((await signedStatus(t, undialed, { CallSid: 'CA-fake', CallStatus: 'completed', CallDuration: '30' })).status).toBe(204);
    expect((await row(undialed)).status).toBe('canceled');
    expect(await ledger(undialed)).toHaveLength(0);
  });

  it('keeps an incoming call incoming on a ringing callback, so it can still be answered', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const res = await api.post('/simulated/inbound-calls', { integration_id: t.integrationId, from: UK_NUMBER }, { auth: t.serverKey });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const id = res.body.request_id;
    const sid = (await row(id)).provider_call_sid as string;
    expect((await signedStatus(t, id, { CallSid: sid, CallStatus: 'ringing' })).status).toBe(204);
    // Another leg's answer does not connect it either.
    expect((await signedStatus(t, id, { CallSid: 'CA-not-this-leg', CallStatus: 'in-progress' })).status).toBe(204);
    expect((await row(id)).status).toBe('incoming');
    const answer = await command(api, agent.widgetToken, { kind: 'answer', request_id: 'ans-ringing' });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.status).toBe('queued');
  });

  it('ignores callbacks for calls the provider does not drive yet, or from another leg', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    // queued: no engine has claimed it.
    const queued = (await requestCall(api, t)).body.request_id;
    expect((await signedStatus(t, queued, { CallSid: 'CA-fake', CallStatus: 'in-progress' })).status).toBe(204);
    expect((await signedStatus(t, queued, { CallSid: 'CA-fake', CallStatus: 'completed', CallDuration: '30' })).status).toBe(204);
    expect((await row(queued)).status).toBe('queued');
    expect((await api.post(`/calls/${queued}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
    // claimed: the voice webhook has not dialed it.
    const claimed = await requestAndClaim(api, t, agent);
    expect((await signedStatus(t, claimed, { CallSid: 'CA-fake', CallStatus: 'ringing' })).status).toBe(204);
    expect((await row(claimed)).status).toBe('claimed');
    expect((await api.post(`/calls/${claimed}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
    await heartbeat(api, agent.engineToken);

    // dialing: a leg of another parent call is not this call's.
    const id = await dialed(t, agent, 'CA-own');
    expect((await signedStatus(t, id, { CallSid: 'CA-stray', ParentCallSid: 'CA-other', CallStatus: 'in-progress' })).status).toBe(204);
    expect((await row(id)).status).toBe('dialing');
    // nor is a leg that names no parent at all (a stray callback of another call of the account)
    expect((await signedStatus(t, id, { CallSid: 'CA-orphan', CallStatus: 'in-progress' })).status).toBe(204);
    expect((await row(id))).toMatchObject({ status: 'dialing', provider_leg_sid: null });
    // The first leg of this call binds; another leg cannot drive it after that.
    expect((await signedStatus(t, id, { CallSid: 'CA-own-leg', ParentCallSid: 'CA-own', CallStatus: 'ringing' })).status).toBe(204);
    expect((await row(id))).toMatchObject({ status: 'ringing', provider_leg_sid: 'CA-own-leg' });
    expect((await signedStatus(t, id, { CallSid: 'CA-second-leg', ParentCallSid: 'CA-own', CallStatus: 'busy' })).status).toBe(204);
    expect((await row(id)).status).toBe('ringing');
    expect((await signedStatus(t, id, { CallSid: 'CA-own-leg', ParentCallSid: 'CA-own', CallStatus: 'in-progress' })).status).toBe(204);
    expect((await row(id)).status).toBe('connected');
  });

  it('answers a voice webhook retry with <Dial> only while dialing, and refuses one without CallSid', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await dialed(t, agent, 'CA-retry');
    expect((await signedVoice(t, voiceParams(t, agent, id, 'CA-retry'))).body).toContain('<Dial');
    expect((await signedStatus(t, id, { CallSid: 'CA-retry-leg', ParentCallSid: 'CA-retry', CallStatus: 'no-answer' })).status).toBe(204);
    expect((await row(id)).status).toBe('no_answer');
    // A replay after the call ended must not dial the number again.
    const replay = await signedVoice(t, voiceParams(t, agent, id, 'CA-retry'));
    expect(replay.body).toContain('<Reject');
    expect(replay.body).not.toContain('<Dial');
    await heartbeat(api, agent.engineToken);

    // No CallSid: refused, and the intent is not consumed (so no '' "retry" can match it later).
    const other = await requestAndClaim(api, t, agent);
    const { CallSid: _omitted, ...withoutSid } = voiceParams(t, agent, other, 'unused');
    await expectError(signedVoice(t, withoutSid), 422, 'invalid_request');
    await expectError(signedVoice(t, withoutSid), 422, 'invalid_request');
    expect((await row(other))).toMatchObject({ status: 'claimed', provider_call_sid: null });
  });

  it('rejects the voice webhook while the platform is disabled, dialing nothing, and dials once it is enabled again', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await requestAndClaim(api, t, agent);
    await h.services.platform.setDisabled(true);
    try {
      const refused = await signedVoice(t, voiceParams(t, agent, id, 'CA-switched-off'));
      expect(refused.body).toContain('<Reject');
      expect(refused.body).not.toContain('<Dial');
      expect(await row(id)).toMatchObject({ status: 'claimed', provider_call_sid: null });
    } finally {
      await h.services.platform.setDisabled(false);
    }
    expect((await signedVoice(t, voiceParams(t, agent, id, 'CA-switched-on'))).body).toContain('<Dial');
  });
});
