/**
 * Incoming calls through Twilio (VOICE_PROVIDER=twilio): a call to one of an integration's
 * numbers rings the routable agent idle longest on a real window, through the TwiML the incoming
 * webhook answers (<Dial><Client> naming the call to the window's Device); nobody to take it is
 * <Reject reason="busy">. The test plays Twilio (signed webhooks, status callbacks on the window's
 * leg); the decline reaches a local stand-in for Twilio's REST API.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMember, setAccountProvider } from '../../api/domain/operator/accounts.js';
import { hangupCall } from '../../api/domain/calls/hangup.js';
import { INBOUND_MAX_RINGS, takeTwilioCall } from '../../api/domain/calls/inbound-twilio.js';
import { revokeIntegration } from '../../api/domain/operator/revocation.js';
import { setIncomingNumbers } from '../../api/domain/operator/telephony.js';
import { setPolicy } from '../../api/domain/operator/integrations.js';
import { PROVIDER_PATHS } from '../../api/providers/twiml.js';
import { StoreUnavailable } from '../../api/store/pg.js';
import { engineIdentity } from '../../shared/prefixes.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, heartbeat, readyAgent, widgetState, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { providerWebhooks, ringEndedPath } from '../helpers/provider.js';
import { seedTenant, UK_NUMBER, type Tenant } from '../helpers/tenant.js';
import { callList, completedCall, startTwilioStandIn, TWILIO, twilioError, type TwilioStandIn } from '../helpers/twilio-stand-in.js';

const ACCOUNT_SID = TWILIO.accountSid;

describe.each(storeDrivers())('incoming calls through Twilio on %s', (driver) => {
  let standIn: TwilioStandIn;
  let h: Harness;
  let api: Client;

  beforeAll(async () => {
    standIn = await startTwilioStandIn();
    h = await createHarness(driver, { voiceProvider: 'twilio', twilioApiBaseUrl: standIn.url, twilioTimeoutMs: 300 });
    api = client(h.app);
  });
  afterAll(async () => {
    await h.close();
    await standIn.close();
  });

  const { signedIncoming, signedStatus, signedRingEnded, postWebhook } = providerWebhooks(() => h, () => api);
  let serial = 0;

  /** A tenant on Twilio whose integration takes the calls of a number of its own. */
  async function twilioTenant(): Promise<Tenant & { number: string }> {
    const t = await seedTenant(h.services);
    await setAccountProvider(h.services, t.accountId, TWILIO);
    const number = `+1202555${String(1000 + ++serial).slice(-4)}`;
    await setIncomingNumbers(h.services, t.integrationId, [number]);
    return { ...t, number };
  }
  const incoming = (t: Tenant & { number: string }, callSid: string, from = UK_NUMBER) =>
    signedIncoming(t, { CallSid: callSid, From: from, To: t.number, AccountSid: ACCOUNT_SID, Direction: 'inbound' });
  /** the incoming <Dial>'s action, with what Twilio sends of the caller's leg (its From and To: the number called) */
  const ringEnded = (t: Tenant & { number: string }, intentId: string, params: Record<string, string>) =>
    signedRingEnded(t, intentId, { From: UK_NUMBER, To: t.number, ...params });
  const intentOf = (twiml: string) => /<Parameter name="intent" value="([^"]+)"\/>/.exec(twiml)?.[1];

  it("rings the agent's Twilio window with <Dial><Client> naming the call; the window's leg answers it and the caller's end completes it", async () => {
    const t = await twilioTenant();
    const agent = await readyAgent(api, t, t.agent.email, false);
    const rung = await incoming(t, 'CAin-1');
    expect(rung.status).toBe(200);
    const id = intentOf(rung.body);
    expect(id).toMatch(/^ci_/);
    // All of it: without `answered` among the events, Twilio would never say the call was answered;
    // without answerOnBridge, the caller's leg would be answered (and billed) from the first ring.
    expect(rung.body).toBe(
      `<?xml version="1.0" encoding="UTF-8"?><Response><Dial callerId="${t.number}" timeout="30" timeLimit="3600" action="${h.config.publicBaseUrl}${PROVIDER_PATHS.ringEnded}?intent=${id}" method="POST" answerOnBridge="true">` +
        `<Client statusCallback="${h.config.publicBaseUrl}${PROVIDER_PATHS.status}?intent=${id}" statusCallbackEvent="initiated ringing answered completed" statusCallbackMethod="POST">` +
        `<Identity>${engineIdentity(agent.engineId)}</Identity><Parameter name="intent" value="${id}"/></Client></Dial></Response>`,
    );
    expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ request_id: id, direction: 'inbound', status: 'incoming' });

    // Twilio asking again for the same call gets the same call, not a second one.
    expect(intentOf((await incoming(t, 'CAin-1')).body)).toBe(id);

    const leg = { CallSid: 'CAin-1-client', ParentCallSid: 'CAin-1', AccountSid: ACCOUNT_SID };
    expect((await signedStatus(t, id!, { ...leg, CallStatus: 'ringing' })).status).toBe(204);
    expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ status: 'incoming' });
    // A leg of another call cannot drive this one.
    await signedStatus(t, id!, { CallSid: 'CAother', ParentCallSid: 'CAother-parent', CallStatus: 'in-progress', AccountSid: ACCOUNT_SID });
    expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ status: 'incoming' });
    expect((await signedStatus(t, id!, { ...leg, CallStatus: 'in-progress' })).status).toBe(204);
    expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ status: 'connected' });
    expect((await signedStatus(t, id!, { ...leg, CallStatus: 'completed', CallDuration: '12' })).status).toBe(204);
    const [row] = await h.services.db.query<{ status: string; provider: string; provider_leg_sid: string }>('SELECT status, provider, provider_leg_sid FROM call_intents WHERE id = $1', [id]);
    expect(row).toEqual({ status: 'completed', provider: 'twilio', provider_leg_sid: 'CAin-1-client' });
  });

  it('records one call, and rings it for both, when Twilio asks twice at once: with one agent free, or a second one who could take another', async () => {
    for (const agents of [1, 2]) {
      const t = await twilioTenant();
      await readyAgent(api, t, t.agent.email, false);
      if (agents === 2) {
        const bea = await createMember(h.services, { accountId: t.accountId, email: 'bea@acme.example', name: 'Bea', departmentId: t.salesId });
        await readyAgent(api, t, bea.email, false);
      }
      // The second request has looked for the call and found none when the first records it.
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const db = new Proxy(h.services.db, {
        get: (target, name) =>
          name === 'query'
            ? async (text: string, params?: unknown[]) => {
                const rows = await target.query(text, params);
                if (text.includes('provider_call_sid = $1') && rows.length === 0) await gate;
                return rows;
              }
            : Reflect.get(target, name, target),
      });
      const request = { integrationId: t.integrationId, callSid: `CAin-twice-${agents}`, from: UK_NUMBER };
      const second = takeTwilioCall({ ...h.services, db }, request);
      const first = await takeTwilioCall(h.services, request);
      release();
      if (!('ring' in first)) throw new Error(`the first was refused: ${first.noRing}`);
      const again = await second;
      expect('ring' in again && again.ring.id, `${agents} agent(s)`).toBe(first.ring.id);
      const rows = await h.services.db.query('SELECT id FROM call_intents WHERE integration_id = $1', [t.integrationId]);
      expect(rows).toHaveLength(1);
    }
  });

  it("records a decline before Twilio named the window's leg at once, asking Twilio for nothing: the window's ring ends, and the caller goes on", async () => {
    const { t, agents } = await team(2);
    const rung = await incoming(t, 'CAin-2');
    const id = intentOf(rung.body)!;
    const [alex, bea] = [agentRung(agents, rung.body), agents.find((agent) => agent !== agentRung(agents, rung.body))!];
    standIn.requests.length = 0;
    const declined = await command(api, alex.widgetToken, { kind: 'decline', request_id: 'decline-twilio' });
    expect(declined.status, JSON.stringify(declined.body)).toBe(200);
    // the caller's leg is not ended; the window sees its call over and rejects its ring
    expect(standIn.requests).toEqual([]);
    expect((await widgetState(api, alex.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'rejected' });
    const next = await ringEnded(t, id, { CallSid: 'CAin-2', CallStatus: 'in-progress', DialCallStatus: 'busy', DialCallSid: 'CAin-2-client', AccountSid: ACCOUNT_SID });
    expect(next.body).toContain(`<Identity>${engineIdentity(bea.engineId)}</Identity>`);
  });

  it("tells the rung agent at once that the ring ended, also when ringing the next agent fails (the store): Twilio is answered 503 and tries the number's fallback", async () => {
    const { t, agents } = await team(2);
    const rung = await incoming(t, 'CAin-store');
    const id = intentOf(rung.body)!;
    const alex = agentRung(agents, rung.body);
    // the widget's state is read, and so cached, while the call rings
    expect((await widgetState(api, alex.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'incoming' });
    const db = h.services.db;
    const query = db.query;
    db.query = (async (text: string, params?: readonly unknown[]) => {
      if (text.includes('FROM engines e JOIN members')) throw new StoreUnavailable({ code: '57014' });
      return query.call(db, text, params);
    }) as typeof db.query;
    try {
      const next = await ringEnded(t, id, { CallSid: 'CAin-store', CallStatus: 'in-progress', DialCallStatus: 'no-answer', DialCallSid: 'CAin-store-client', AccountSid: ACCOUNT_SID });
      expect(next.status).toBe(503);
    } finally {
      db.query = query;
    }
    // the ring's end was recorded, and told (before the fix, the widget's cached state said it rang on)
    expect((await widgetState(api, alex.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'no_answer' });
  });

  it("ends the caller's leg when the backend hangs up a ringing call, and does not ring the caller on after it, also when Twilio did not confirm", async () => {
    const { t } = await team(2);
    const id = intentOf((await incoming(t, 'CAin-backend')).body)!;
    await signedStatus(t, id, { CallSid: 'CAin-backend-client', ParentCallSid: 'CAin-backend', CallStatus: 'initiated', AccountSid: ACCOUNT_SID });
    standIn.requests.length = 0;
    // Twilio fails the first hangup: 502, and the ring times out meanwhile
    standIn.answer(() => twilioError(500, 20500, 'Internal Server Error'));
    try {
      await expectError(api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey }), 502, 'hangup_uncertain');
    } finally {
      standIn.answer(completedCall);
    }
    expect(standIn.requests.map((r) => r.path)).toEqual([`/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAin-backend.json`]);
    const after = await ringEnded(t, id, { CallSid: 'CAin-backend', CallStatus: 'in-progress', DialCallStatus: 'no-answer', DialCallSid: 'CAin-backend-client', AccountSid: ACCOUNT_SID });
    expect(after.body).toBe(HANGUP);
    expect((await rings(t)).map((ring) => ring.ring_attempt)).toEqual([1]);
  });

  it("passes the caller on when the agent hangs up a call still ringing (a decline), from the widget or the window, and when the window went offline", async () => {
    for (const from of ['widget', 'window', 'offline'] as const) {
      const { t, agents } = await team(2);
      const rung = await incoming(t, `CAin-hangup-${from}`);
      const id = intentOf(rung.body)!;
      const alex = agentRung(agents, rung.body);
      const leg = { CallSid: `CAin-hangup-${from}-client`, ParentCallSid: `CAin-hangup-${from}`, AccountSid: ACCOUNT_SID };
      await signedStatus(t, id, { ...leg, CallStatus: 'initiated' });
      standIn.requests.length = 0;
      if (from === 'widget') expect((await command(api, alex.widgetToken, { kind: 'hangup', request_id: 'hangup-ringing' })).status).toBe(200);
      else if (from === 'window') expect((await api.post('/engine/hangup', {}, { auth: alex.engineToken })).status).toBe(200);
      // what the reaper does with the calls of a window gone silent, or whose socket dropped for good
      else await hangupCall(h.services, id, 'engine_offline');
      expect(standIn.requests.map((r) => r.path), from).toEqual([`/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${leg.CallSid}.json`]);
      const next = await ringEnded(t, id, { CallSid: leg.ParentCallSid, CallStatus: 'in-progress', DialCallStatus: 'canceled', DialCallSid: leg.CallSid, AccountSid: ACCOUNT_SID });
      expect(next.body, from).toContain('<Dial ');
    }
  });

  it("hangs up the caller, and records the call answered, when the agent hangs up an answered call whose answer Twilio had not reported yet: the caller is not rung on to the next agent", async () => {
    for (const order of ['ring-ended first', 'callback first'] as const) {
      const { t, agents } = await team(2);
      const callSid = `CAin-talked-${order.split(' ')[0]}`;
      const rung = await incoming(t, callSid);
      const id = intentOf(rung.body)!;
      const alex = agentRung(agents, rung.body);
      const leg = { CallSid: `${callSid}-client`, ParentCallSid: callSid, AccountSid: ACCOUNT_SID };
      await signedStatus(t, id, { ...leg, CallStatus: 'initiated' });
      await h.clock.advanceSeconds(100);
      // Alex answered and talked; the `in-progress` callback never came (a store blip Twilio did not retry). Alex hangs up.
      expect((await command(api, alex.widgetToken, { kind: 'hangup', request_id: `hangup-talked-${order}` })).status).toBe(200);
      const completed = { ...leg, CallStatus: 'completed', CallDuration: '95' };
      const ended = { CallSid: callSid, CallStatus: 'in-progress', DialCallStatus: 'completed', DialCallSid: leg.CallSid, DialCallDuration: '95', AccountSid: ACCOUNT_SID };
      if (order === 'callback first') await signedStatus(t, id, completed);
      const next = await ringEnded(t, id, ended);
      if (order === 'ring-ended first') await signedStatus(t, id, completed);
      expect(next.body, order).toBe(HANGUP);
      const all = await rings(t);
      expect(all, order).toHaveLength(1);
      expect(all[0]!.status, order).toBe('completed');
      const [row] = await h.services.db.query<{ answered_at: string | null; ended_at: string | null }>('SELECT answered_at, ended_at FROM call_intents WHERE id = $1', [id]);
      expect(Number(row!.ended_at) - Number(row!.answered_at), order).toBeGreaterThan(0);
    }
  });

  it("records a decline as declined when the window's leg reports its end before Twilio answers the hangup", async () => {
    for (const [n, status] of (['busy', 'no-answer', 'canceled'] as const).entries()) {
      const t = await twilioTenant();
      const agent = await readyAgent(api, t, t.agent.email, false);
      const callSid = `CAin-race-${n}`;
      const id = intentOf((await incoming(t, callSid)).body)!;
      await signedStatus(t, id, { CallSid: `${callSid}-client`, ParentCallSid: callSid, CallStatus: 'initiated', AccountSid: ACCOUNT_SID });
      standIn.answer(async (request) => {
        await signedStatus(t, id, { CallSid: `${callSid}-client`, ParentCallSid: callSid, CallStatus: status, AccountSid: ACCOUNT_SID });
        return completedCall(request);
      });
      try {
        expect((await command(api, agent.widgetToken, { kind: 'decline', request_id: `decline-race-${n}` })).status).toBe(200);
      } finally {
        standIn.answer(completedCall);
      }
      const [row] = await h.services.db.query<{ status: string; end_reason: string }>('SELECT status, end_reason FROM call_intents WHERE id = $1', [id]);
      expect(row, status).toEqual({ status: 'rejected', end_reason: 'declined' });
    }
  });

  it('refuses a decline that reaches a ring answered meanwhile, and leaves the conversation up', async () => {
    const t = await twilioTenant();
    const agent = await readyAgent(api, t, t.agent.email, false);
    const id = intentOf((await incoming(t, 'CAin-decline-late')).body)!;
    await signedStatus(t, id, { CallSid: 'CAin-decline-late-client', ParentCallSid: 'CAin-decline-late', CallStatus: 'ringing', AccountSid: ACCOUNT_SID });
    // The widget decides on the ring it was shown; the window's answer lands before the decline reads the call.
    const db = h.services.db;
    const query = db.query;
    let answerFirst = true;
    db.query = (async (text: string, params?: readonly unknown[]) => {
      if (answerFirst && text === 'SELECT * FROM call_intents WHERE id = $1' && params?.[0] === id) {
        answerFirst = false;
        await signedStatus(t, id, { CallSid: 'CAin-decline-late-client', ParentCallSid: 'CAin-decline-late', CallStatus: 'in-progress', AccountSid: ACCOUNT_SID });
      }
      return query.call(db, text, params);
    }) as typeof db.query;
    standIn.requests.length = 0;
    try {
      expectError(await command(api, agent.widgetToken, { kind: 'decline', request_id: 'decline-answered' }), 409, 'invalid_state');
    } finally {
      db.query = query;
    }
    expect(answerFirst).toBe(false);
    // Twilio was asked to end no leg: the caller and the agent talk on.
    expect(standIn.requests.filter((request) => request.method === 'POST')).toEqual([]);
    const [row] = await h.services.db.query<{ status: string; ended_at: number | null }>('SELECT status, ended_at FROM call_intents WHERE id = $1', [id]);
    expect(row).toEqual({ status: 'connected', ended_at: null });
  });

  it('forgets a decline that failed once the ring is answered: its retry is refused, and the call ends as the far end ends it', async () => {
    const t = await twilioTenant();
    const agent = await readyAgent(api, t, t.agent.email, false);
    const id = intentOf((await incoming(t, 'CAin-decline-retry')).body)!;
    const leg = { CallSid: 'CAin-decline-retry-client', ParentCallSid: 'CAin-decline-retry', AccountSid: ACCOUNT_SID };
    await signedStatus(t, id, { ...leg, CallStatus: 'ringing' });
    // The decline is recorded and asked for, and the store fails before the provider is asked: it stays to be retried.
    const db = h.services.db;
    const query = db.query;
    db.query = (async (text: string, params?: readonly unknown[]) => {
      if (text.includes('provider_account_sid') && text.includes('FROM accounts')) throw new StoreUnavailable({ code: '57014' });
      return query.call(db, text, params);
    }) as typeof db.query;
    try {
      expectError(await command(api, agent.widgetToken, { kind: 'decline', request_id: 'decline-retry' }), 503, 'service_unavailable');
    } finally {
      db.query = query;
    }
    await h.clock.advanceSeconds(2);
    await signedStatus(t, id, { ...leg, CallStatus: 'in-progress' });
    expectError(await command(api, agent.widgetToken, { kind: 'decline', request_id: 'decline-retry' }), 409, 'invalid_state');
    const [asked] = await h.services.db.query<{ hangup_reason: string | null }>('SELECT hangup_reason FROM call_intents WHERE id = $1', [id]);
    expect(asked!.hangup_reason).toBeNull();
    await h.clock.advanceSeconds(30);
    await signedStatus(t, id, { ...leg, CallStatus: 'completed', CallDuration: '30' });
    const [row] = await h.services.db.query<{ status: string; end_reason: string }>('SELECT status, end_reason FROM call_intents WHERE id = $1', [id]);
    expect(row).toEqual({ status: 'completed', end_reason: 'far_end' });
  });

  it('ends a call its agent let ring out no_answer', async () => {
    const t = await twilioTenant();
    await readyAgent(api, t, t.agent.email, false);
    const id = intentOf((await incoming(t, 'CAin-3')).body)!;
    await signedStatus(t, id, { CallSid: 'CAin-3-client', ParentCallSid: 'CAin-3', CallStatus: 'no-answer', AccountSid: ACCOUNT_SID });
    const [row] = await h.services.db.query<{ status: string }>('SELECT status FROM call_intents WHERE id = $1', [id]);
    expect(row!.status).toBe('no_answer');
  });

  it("settles a ring none of whose callbacks came (a store outage through the call) from the leg Twilio lists under the caller's leg to this window's client; a ring Twilio lists none of is rung out", async () => {
    for (const listed of [true, false]) {
      const t = await twilioTenant();
      const agent = await readyAgent(api, t, t.agent.email, false);
      const callSid = `CAin-lost-${listed}`;
      const id = intentOf((await incoming(t, callSid)).body)!;
      const client = `client:${engineIdentity(agent.engineId)}`;
      const endedAt = Math.floor(h.clock.now() / 1000) * 1000 + 60_000;
      standIn.requests.length = 0;
      // the window's ring: answered, 50 s of talk (the caller's leg also rang nobody else here)
      standIn.answer((request) =>
        callList(listed ? [{ sid: `${callSid}-client`, parent_call_sid: callSid, to: client, account_sid: request.user, status: 'completed', end_time: new Date(endedAt).toUTCString(), duration: '50' }] : []),
      );
      // the call ends 60 s on; its window then lets go of it, and no callback ever comes
      await h.clock.advanceSeconds(70);
      for (let seconds = 0; seconds < 90; seconds += 10) {
        await h.clock.advanceSeconds(10);
        await heartbeat(api, agent.engineToken);
        await h.services.reaper.tick();
      }
      // (the reaper reads the other tests' calls left live too)
      const reads = standIn.requests.filter((request) => request.method === 'GET').map((request) => Object.fromEntries(new URL(request.path, 'http://x').searchParams));
      expect(reads.filter((read) => read.ParentCallSid === callSid)[0]).toEqual({ ParentCallSid: callSid, To: client, PageSize: '20' });
      const [row] = await h.services.db.query<{ status: string; provider_leg_sid: string | null; ended_at: string; answered_at: string | null }>(
        'SELECT status, provider_leg_sid, ended_at, answered_at FROM call_intents WHERE id = $1',
        [id],
      );
      if (listed) expect(row).toMatchObject({ status: 'completed', provider_leg_sid: `${callSid}-client`, ended_at: endedAt, answered_at: endedAt - 50_000 });
      else expect(row).toMatchObject({ status: 'no_answer', provider_leg_sid: null });
    }
    standIn.answer(completedCall);
  });

  it("rings out a ring its window reports as its own, past the ring window, once Twilio lists no leg of it (the caller left before the <Dial> ran, or every callback was lost); one Twilio lists as ringing or answered is kept, and so is one whose own leg Twilio does not know", async () => {
    for (const listed of ['none', 'ringing', 'in-progress', 'unknown-leg'] as const) {
      const t = await twilioTenant();
      const agent = await readyAgent(api, t, t.agent.email, false);
      const callSid = `CAin-held-${listed}`;
      const id = intentOf((await incoming(t, callSid)).body)!;
      const client = `client:${engineIdentity(agent.engineId)}`;
      const leg = { sid: `${callSid}-client`, parent_call_sid: callSid, to: client, status: listed };
      // the ring's first callback named its leg, which Twilio then says it does not know (its record read by sid)
      if (listed === 'unknown-leg') await signedStatus(t, id, { CallSid: leg.sid, ParentCallSid: callSid, CallStatus: 'initiated', AccountSid: ACCOUNT_SID });
      standIn.answer((request) =>
        request.method === 'GET' && request.path.includes(`ParentCallSid=${callSid}`)
          ? callList(listed === 'none' ? [] : [{ ...leg, account_sid: request.user }])
          : request.method === 'GET' && request.path.includes(leg.sid)
            ? twilioError(404, 20404, 'The requested resource was not found')
            : completedCall(request),
      );
      try {
        // The window's device never rang (or rang unseen): the window reports the call it is listed all the same.
        for (let seconds = 0; seconds < 120; seconds += 10) {
          await h.clock.advanceSeconds(10);
          expect((await heartbeat(api, agent.engineToken, { call_id: id })).status).toBe(200);
          await h.services.reaper.tick();
        }
      } finally {
        standIn.answer(completedCall);
      }
      const [row] = await h.services.db.query<{ status: string; orphaned: boolean }>('SELECT status, orphaned FROM call_intents WHERE id = $1', [id]);
      const expected = { none: 'no_answer', ringing: 'incoming', 'in-progress': 'connected', 'unknown-leg': 'incoming' }[listed];
      expect(row, listed).toEqual({ status: expected, orphaned: false });
      // Rung out, the agent is free again: the widget shows the ring over.
      if (listed === 'none') expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'no_answer' });
    }
  });

  /** A Twilio tenant with `count` agents ready on real windows, in the order they opened them (the first is idle longest). */
  async function team(count: number): Promise<{ t: Tenant & { number: string }; agents: Agent[] }> {
    const t = await twilioTenant();
    const agents = [await readyAgent(api, t, t.agent.email, false)];
    for (let n = 1; n < count; n++) {
      const member = await createMember(h.services, { accountId: t.accountId, email: `agent${n}@acme.example`, name: `Agent ${n}`, departmentId: t.salesId });
      agents.push(await readyAgent(api, t, member.email, false));
    }
    return { t, agents };
  }
  const rings = (t: Tenant) =>
    h.services.db.query<{ id: string; member_id: string; status: string; end_reason: string | null; ring_attempt: number; phone_number: string }>(
      'SELECT id, member_id, status, end_reason, ring_attempt, phone_number FROM call_intents WHERE integration_id = $1 ORDER BY ring_attempt',
      [t.integrationId],
    );
  /** The agent whose window a <Dial><Client> rings. */
  const agentRung = (agents: Agent[], twiml: string) => agents.find((agent) => twiml.includes(`<Identity>${engineIdentity(agent.engineId)}</Identity>`))!;
  const HANGUP = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>';

  it('rings the next agent when one lets the call ring out, never one already rung; the caller is hung up once nobody else can take it', async () => {
    const { t, agents } = await team(2);
    const rung = await incoming(t, 'CAin-next');
    const first = intentOf(rung.body)!;
    const [alex, bea] = [agentRung(agents, rung.body), agents.find((agent) => agent !== agentRung(agents, rung.body))!];
    // Twilio's action may come before the leg's own no-answer callback: it records the ring's end itself.
    const ended = { CallSid: 'CAin-next', CallStatus: 'in-progress', DialCallStatus: 'no-answer', DialCallSid: 'CAin-next-client-1', AccountSid: ACCOUNT_SID };
    const next = await ringEnded(t, first, ended);
    expect(next.status).toBe(200);
    const second = intentOf(next.body)!;
    expect(second).toMatch(/^ci_/);
    expect(next.body).toBe(
      `<?xml version="1.0" encoding="UTF-8"?><Response><Dial callerId="${t.number}" timeout="30" timeLimit="3600" action="${h.config.publicBaseUrl}${PROVIDER_PATHS.ringEnded}?intent=${second}" method="POST" answerOnBridge="true">` +
        `<Client statusCallback="${h.config.publicBaseUrl}${PROVIDER_PATHS.status}?intent=${second}" statusCallbackEvent="initiated ringing answered completed" statusCallbackMethod="POST">` +
        `<Identity>${engineIdentity(bea.engineId)}</Identity><Parameter name="intent" value="${second}"/></Client></Dial></Response>`,
    );
    expect((await widgetState(api, alex.widgetToken)).body.call).toMatchObject({ request_id: first, status: 'no_answer' });
    expect((await widgetState(api, bea.widgetToken)).body.call).toMatchObject({ request_id: second, direction: 'inbound', status: 'incoming' });
    // Twilio asking again about the first ring gets the same second one, not a third.
    expect(intentOf((await ringEnded(t, first, ended)).body)).toBe(second);

    // Bea lets it ring out too: Alex is free, but was rung already.
    const last = await ringEnded(t, second, { ...ended, DialCallSid: 'CAin-next-client-2' });
    expect(last.body).toBe(HANGUP);
    expect((await rings(t)).map((ring) => [ring.ring_attempt, ring.status, ring.phone_number])).toEqual([
      [1, 'no_answer', UK_NUMBER],
      [2, 'no_answer', UK_NUMBER],
    ]);
  });

  it("ends only the window's leg when the agent declines, and the caller rings the next agent", async () => {
    const { t, agents } = await team(2);
    const rung = await incoming(t, 'CAin-decline-next');
    const first = intentOf(rung.body)!;
    const [alex, bea] = [agentRung(agents, rung.body), agents.find((agent) => agent !== agentRung(agents, rung.body))!];
    // The window's leg is named by its first callback, `initiated`, which moves nothing.
    const leg = { CallSid: 'CAin-decline-next-client', ParentCallSid: 'CAin-decline-next', AccountSid: ACCOUNT_SID };
    expect((await signedStatus(t, first, { ...leg, CallStatus: 'initiated' })).status).toBe(204);
    standIn.requests.length = 0;
    // Twilio asks the <Dial>'s action as soon as the leg ends, before its answer to the hangup
    // reaches the service, and may report the leg it was asked to end `completed`, with no talk time.
    let next: Awaited<ReturnType<typeof signedRingEnded>> | undefined;
    standIn.answer(async (request) => {
      next = await ringEnded(t, first, { CallSid: 'CAin-decline-next', CallStatus: 'in-progress', DialCallStatus: 'completed', DialCallSid: leg.CallSid, AccountSid: ACCOUNT_SID });
      return completedCall(request);
    });
    try {
      expect((await command(api, alex.widgetToken, { kind: 'decline', request_id: 'decline-next' })).status).toBe(200);
    } finally {
      standIn.answer(completedCall);
    }
    expect(standIn.requests.map((r) => [r.path, r.form])).toEqual([[`/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/${leg.CallSid}.json`, { Status: 'completed' }]]);
    // the record (declined), not DialCallStatus, says how the ring ended
    expect(next?.body).toContain(`<Identity>${engineIdentity(bea.engineId)}</Identity>`);
    expect((await rings(t)).map((ring) => [ring.ring_attempt, ring.status, ring.end_reason])).toEqual([
      [1, 'rejected', 'declined'],
      [2, 'incoming', null],
    ]);
  });

  it('hangs up the caller after an answered call, and when the caller hung up while it rang; nobody else rings', async () => {
    const { t } = await team(2);
    // answered, its callbacks come first
    const answered = intentOf((await incoming(t, 'CAin-answered')).body)!;
    const leg = { CallSid: 'CAin-answered-client', ParentCallSid: 'CAin-answered', AccountSid: ACCOUNT_SID };
    await signedStatus(t, answered, { ...leg, CallStatus: 'in-progress' });
    await signedStatus(t, answered, { ...leg, CallStatus: 'completed', CallDuration: '42' });
    const after = { CallSid: 'CAin-answered', CallStatus: 'in-progress', DialCallStatus: 'completed', DialCallSid: leg.CallSid, DialCallDuration: '42', AccountSid: ACCOUNT_SID };
    expect((await ringEnded(t, answered, after)).body).toBe(HANGUP);
    // answered, the action before any callback: it records the call answered, from its talk time
    const t2 = (await team(2)).t;
    const early = intentOf((await incoming(t2, 'CAin-early')).body)!;
    expect((await ringEnded(t2, early, { ...after, CallSid: 'CAin-early', DialCallSid: 'CAin-early-client' })).body).toBe(HANGUP);
    // the caller hung up while it rang
    const t3 = (await team(2)).t;
    const gone = intentOf((await incoming(t3, 'CAin-gone')).body)!;
    const left = { CallSid: 'CAin-gone', CallStatus: 'completed', DialCallStatus: 'canceled', DialCallSid: 'CAin-gone-client', AccountSid: ACCOUNT_SID };
    expect((await ringEnded(t3, gone, left)).body).toBe(HANGUP);
    expect((await rings(t)).map((ring) => ring.status)).toEqual(['completed']);
    expect((await rings(t2)).map((ring) => ring.status)).toEqual(['completed']);
    expect((await rings(t3)).map((ring) => ring.status)).toEqual(['canceled']);
  });

  it(`rings ${INBOUND_MAX_RINGS} agents at most, one after the other, then hangs up the caller`, async () => {
    const { t, agents } = await team(INBOUND_MAX_RINGS + 1);
    let answer = (await incoming(t, 'CAin-round')).body;
    const rung: Agent[] = [];
    while (answer !== HANGUP) {
      rung.push(agentRung(agents, answer));
      answer = (await ringEnded(t, intentOf(answer)!, { CallSid: 'CAin-round', CallStatus: 'in-progress', DialCallStatus: 'no-answer', AccountSid: ACCOUNT_SID })).body;
    }
    // each a different agent, the last agent never rang
    expect(new Set(rung).size).toBe(INBOUND_MAX_RINGS);
    expect((await rings(t)).map((ring) => [ring.ring_attempt, ring.status])).toEqual(rung.map((_, n) => [n + 1, 'no_answer']));
  });

  it("refuses a ring-ended request for no incoming Twilio call (404), unsigned (403), or without a known DialCallStatus, with another caller's CallSid or without the number called (422); with the platform off it rings nobody", async () => {
    const { t } = await team(2);
    const id = intentOf((await incoming(t, 'CAin-ended-refusals')).body)!;
    const params = { CallSid: 'CAin-ended-refusals', CallStatus: 'in-progress', DialCallStatus: 'no-answer', AccountSid: ACCOUNT_SID };
    await expectError(ringEnded(t, 'ci_unknown', params), 404, 'not_found');
    await expectError(postWebhook(ringEndedPath(id), params, 'bm90IGEgc2lnbmF0dXJl'), 403, 'signature_invalid');
    await expectError(ringEnded(t, id, { ...params, DialCallStatus: 'ringing' }), 422, 'invalid_request');
    await expectError(ringEnded(t, id, { ...params, CallSid: 'CAanother' }), 422, 'invalid_request');
    await expectError(signedRingEnded(t, id, params), 422, 'invalid_request'); // no To: the number called is the next ring's caller ID
    await h.services.platform.setDisabled(true);
    try {
      expect((await ringEnded(t, id, params)).body).toBe(HANGUP);
    } finally {
      await h.services.platform.setDisabled(false);
    }
    expect((await rings(t)).map((ring) => ring.ring_attempt)).toEqual([1]);
  });

  it('answers <Reject reason="busy"> and records nothing when nobody can take the call: no window, or a simulated one only', async () => {
    const t = await twilioTenant();
    const count = async () => (await h.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM call_intents WHERE integration_id = $1', [t.integrationId]))[0]!.n;
    const busy = '<Reject reason="busy"/>';
    expect((await incoming(t, 'CAin-4')).body).toContain(busy);
    // A simulated window listens to the simulator, never to Twilio.
    await readyAgent(api, t, t.agent.email, true);
    expect((await incoming(t, 'CAin-5')).body).toContain(busy);
    expect(await count()).toBe(0);
  });

  it("never hands the caller's number to the window's Device: each ring's caller ID is the number called, and the window shows what the policy lets it", async () => {
    const { t, agents } = await team(2);
    await setPolicy(h.services, t.integrationId, { numberVisibility: 'hide' });
    const rung = await incoming(t, 'CAin-private');
    // Without a callerId on the <Dial>, Twilio rings the Device with the caller's number as its From.
    expect(rung.body).toContain(`<Dial callerId="${t.number}" `);
    expect(rung.body).not.toContain(UK_NUMBER);
    const first = agentRung(agents, rung.body);
    expect((await widgetState(api, first.widgetToken)).body.call).toMatchObject({ status: 'incoming', display: { number: null } });
    // the next agent's ring too
    const next = await ringEnded(t, intentOf(rung.body)!, { CallSid: 'CAin-private', CallStatus: 'in-progress', DialCallStatus: 'no-answer', AccountSid: ACCOUNT_SID });
    expect(next.body).toContain(`<Dial callerId="${t.number}" `);
    expect(next.body).not.toContain(UK_NUMBER);
  });

  it('rings a caller who withholds the number like any other, shown with no number (with the name Twilio looked up, if any)', async () => {
    for (const [n, from] of ['anonymous', '+266696687', 'client:someone'].entries()) {
      const t = await twilioTenant();
      const agent = await readyAgent(api, t, t.agent.email, false);
      const rung = await signedIncoming(t, { CallSid: `CAin-withheld-${n}`, From: from, To: t.number, CallerName: n === 0 ? 'Pat Doe' : '', AccountSid: ACCOUNT_SID });
      const id = intentOf(rung.body);
      expect(id, from).toMatch(/^ci_/);
      const call = (await widgetState(api, agent.widgetToken)).body.call;
      expect(call, from).toMatchObject({ request_id: id, direction: 'inbound', status: 'incoming', display: { number: null, name: n === 0 ? 'Pat Doe' : null } });
      await command(api, agent.widgetToken, { kind: 'decline', request_id: `decline-withheld-${n}` });
    }
  });

  it("refuses a number no integration takes (404), a request not signed with the number's account token (403), and one without To, From or CallSid (422)", async () => {
    const t = await twilioTenant();
    const params = { CallSid: 'CAin-7', From: UK_NUMBER, To: '+12025550999', AccountSid: ACCOUNT_SID };
    await expectError(signedIncoming(t, params), 404, 'not_found');
    await expectError(postWebhook(PROVIDER_PATHS.incoming, { ...params, To: t.number }, 'bm90IGEgc2lnbmF0dXJl'), 403, 'signature_invalid');
    await expectError(signedIncoming(t, { From: UK_NUMBER, To: t.number }), 422, 'invalid_request');
  });

  it('takes a number for one integration only, and gives it up with --none', async () => {
    const a = await twilioTenant();
    const b = await seedTenant(h.services);
    await expect(setIncomingNumbers(h.services, b.integrationId, [a.number])).rejects.toThrow(`${a.number} takes the incoming calls of ${a.integrationId} already.`);
    await expect(setIncomingNumbers(h.services, b.integrationId, ['12345'])).rejects.toThrow('Not a valid E.164 number');
    expect(await setIncomingNumbers(h.services, a.integrationId, [])).toEqual([]);
    expect(await setIncomingNumbers(h.services, b.integrationId, [a.number, a.number])).toEqual([a.number]);
  });

  it("frees a revoked integration's numbers for the integration that replaces it", async () => {
    const old = await twilioTenant();
    const replacement = await seedTenant(h.services);
    await revokeIntegration(h.services, old.integrationId);
    expect(await h.services.db.query('SELECT number FROM incoming_numbers WHERE integration_id = $1', [old.integrationId])).toEqual([]);
    expect(await setIncomingNumbers(h.services, replacement.integrationId, [old.number])).toEqual([old.number]);
    // a number a revoked integration still holds (revoked before revocation let go of them) is free too
    const other = await twilioTenant();
    await revokeIntegration(h.services, other.integrationId);
    await h.services.db.query('INSERT INTO incoming_numbers (number, integration_id, created_at) VALUES ($1, $2, 0)', [other.number, other.integrationId]);
    expect(await setIncomingNumbers(h.services, replacement.integrationId, [old.number, other.number])).toEqual([old.number, other.number].sort());
    const held = await h.services.db.query<{ number: string }>('SELECT number FROM incoming_numbers WHERE integration_id = $1 ORDER BY number', [replacement.integrationId]);
    expect(held.map((row) => row.number)).toEqual([old.number, other.number].sort());
  });
});

describe('the incoming webhook on the simulated provider', () => {
  it('is not served: only Twilio brings calls to numbers', async () => {
    const h = await createHarness('pglite');
    try {
      const t = await seedTenant(h.services);
      const { signedIncoming } = providerWebhooks(() => h, () => client(h.app));
      await setIncomingNumbers(h.services, t.integrationId, ['+12025550190']);
      await expectError(signedIncoming(t, { CallSid: 'CAsim', From: UK_NUMBER, To: '+12025550190' }), 404, 'not_found');
    } finally {
      await h.close();
    }
  });
});
