/**
 * Provider webhooks, incoming calls and widget commands over HTTP (spec sections 3, 4, 5 rule 8
 * and 8 "incoming"): the voice webhook refuses missing parameters before anything else, verifies
 * the signature against the configured public URL, and consumes a claimed intent once; status
 * callbacks only move a call forward and bill once; simulated incoming calls ring the routable
 * agent and are answered, declined or time out; widget commands follow the agent's policy and the
 * call's state, are deduplicated by request_id and reach the call window; widget tokens refresh
 * with a short grace and revoke without ending the call.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { setIntegrationEnabled } from '../../api/domain/operator/integrations.js';
import { runCommand } from '../../api/cli/admin-bridge.js';
import { setPolicy } from '../../api/domain/operator/integrations.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import { signWebhook, type WebhookParams } from '../../api/providers/signature.js';
import { injectInbound } from '../../api/domain/calls/inbound.js';
import { StoreUnavailable } from '../../api/store/pg.js';
import { LIMITS } from '../../shared/limits.js';
import { WidgetState } from '../../shared/schemas/widget-api.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, heartbeat, launchTicket, openSession, readyAgent, requestCall, widgetState, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { providerWebhooks, realAgent, requestAndClaim, statusPath, VOICE_PATH } from '../helpers/provider.js';
import { CALLER_ID, UK_NUMBER, US_NUMBER, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('provider webhooks, incoming calls and widget commands on %s', (driver) => {
  let h: Harness;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
  });
  afterAll(() => h.close());
  // Every test has its own tenant; moving past the rate window keeps the suite's requests apart.
  beforeEach(() => h.clock.advanceSeconds(61));

  // ---------------------------------------------------------------- helpers

  const nowSeconds = () => Math.floor(h.clock.now() / 1000);

  const { authTokenOf, sign, postWebhook, signedVoice, signedStatus } = providerWebhooks(() => h, () => api);

  async function callStatus(t: Tenant, id: string) {
    const res = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  }

  async function state(widgetToken: string) {
    const res = await widgetState(api, widgetToken);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return WidgetState.parse(res.body);
  }

  async function intentRow(id: string) {
    const [row] = await h.services.db.query<{ provider_call_sid: string | null; status: string }>(
      'SELECT provider_call_sid, status FROM call_intents WHERE id = $1',
      [id],
    );
    return row!;
  }

  async function commandRows(t: Tenant, requestId: string): Promise<number> {
    const [row] = await h.services.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM widget_commands WHERE integration_id = $1 AND request_id = $2',
      [t.integrationId, requestId],
    );
    return row!.n;
  }

  /** Session → ticket → pair as a real (non-simulated) window → voice token → ready heartbeat. */
  /** A simulated outbound call to the connected state (the simulator answers 3 s after dialing). */
  async function connectedCall(t: Tenant, agent: Agent): Promise<string> {
    const id = await requestAndClaim(api, t, agent);
    await heartbeat(api, agent.engineToken, { call_id: id });
    await h.clock.advanceSeconds(3);
    expect((await callStatus(t, id)).status).toBe('connected');
    return id;
  }

  const voiceParams = (t: Tenant, agent: Agent, intentId: string, callSid: string, overrides: WebhookParams = {}): WebhookParams => ({
    CallSid: callSid,
    From: `client:c2c_${agent.engineId}`,
    To: intentId,
    Biz: t.accountId,
    CallerId: CALLER_ID,
    ...overrides,
  });

  const inbound = (t: Tenant, body: Record<string, unknown> = {}) =>
    api.post('/simulated/inbound-calls', { integration_id: t.integrationId, from: UK_NUMBER, caller_name: 'Pat', ...body }, { auth: t.serverKey });

  // ---------------------------------------------------------------- voice webhook: refusals

  it('refuses a voice webhook lacking To, Biz or CallerId with 422 invalid_request, even unsigned', async () => {
    const t = await seedTenant(h.services);
    const complete: WebhookParams = { CallSid: 'CA-missing', From: 'client:c2c_eng_x', To: 'ci_unknown', Biz: t.accountId, CallerId: CALLER_ID };
    for (const missing of ['To', 'Biz', 'CallerId'] as const) {
      const params = { ...complete };
      delete params[missing];
      // No signature at all, and a wrong one: the missing parameter decides first either way.
      await expectError(postWebhook(VOICE_PATH, params, undefined), 422, 'invalid_request');
      await expectError(postWebhook(VOICE_PATH, params, 'bogus'), 422, 'invalid_request');
    }
    // The complete set without a signature is refused for the signature instead.
    await expectError(postWebhook(VOICE_PATH, complete, undefined), 403, 'signature_invalid');
  });

  it('refuses a voice webhook with a bad, missing or wrong-URL signature with 403 signature_invalid', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await requestAndClaim(api, t, agent);
    const params = voiceParams(t, agent, id, 'CA-sig-1');
    const token = await authTokenOf(t.accountId);

    await expectError(postWebhook(VOICE_PATH, params, undefined), 403, 'signature_invalid');
    await expectError(postWebhook(VOICE_PATH, params, 'not-a-signature'), 403, 'signature_invalid');
    await expectError(postWebhook(VOICE_PATH, params, sign('another-auth-token', VOICE_PATH, params)), 403, 'signature_invalid');
    // Signed over other parameters than the ones sent.
    await expectError(postWebhook(VOICE_PATH, params, sign(token, VOICE_PATH, { ...params, CallerId: '+12025550999' })), 403, 'signature_invalid');
    // Signed against the request's Host header instead of the configured public URL.
    const hostSigned = signWebhook(token, `http://evil.example${VOICE_PATH}`, params);
    await expectError(postWebhook(VOICE_PATH, params, hostSigned, { host: 'evil.example' }), 403, 'signature_invalid');
    expect((await callStatus(t, id)).status).toBe('claimed');

    // The same request signed against the public URL is accepted (and consumes the intent).
    const accepted = await postWebhook(VOICE_PATH, params, sign(token, VOICE_PATH, params), { host: 'evil.example' });
    expect(accepted.status).toBe(200);
    expect(accepted.body).toContain('<Dial');
    expect((await callStatus(t, id)).status).toBe('dialing');
  });

  // ---------------------------------------------------------------- voice webhook: consumed once

  it('consumes a claimed intent exactly once: same answer to a provider retry, <Reject> to any other use', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await requestAndClaim(api, t, agent);
    // A real window connects itself: the claim alone does not dial.
    expect((await callStatus(t, id)).status).toBe('claimed');

    const first = await signedVoice(t, voiceParams(t, agent, id, 'CA1'));
    expect(first.status).toBe(200);
    expect(String(first.headers['content-type'])).toMatch(/^text\/xml/);
    const twiml: string = first.body;
    const dial = /<Dial\b([^>]*)>/.exec(twiml);
    expect(dial, twiml).not.toBeNull();
    expect(dial![1]).toContain(`callerId="${CALLER_ID}"`);
    // The integration's 3600 s cap (the wallet affords far more).
    expect(dial![1]).toContain('timeLimit="3600"');
    expect(twiml).toMatch(new RegExp(`<Number\\b[^>]*>\\${US_NUMBER}</Number>`));
    expect(twiml).not.toContain('<Reject');
    expect((await callStatus(t, id)).status).toBe('dialing');

    // The provider retrying the same webhook (same CallSid) gets the same instructions.
    const retry = await signedVoice(t, voiceParams(t, agent, id, 'CA1'));
    expect(retry.status).toBe(200);
    expect(retry.body).toBe(twiml);

    // A second use of the intent (another CallSid) is refused.
    const second = await signedVoice(t, voiceParams(t, agent, id, 'CA2'));
    expect(second.status).toBe(200);
    expect(String(second.headers['content-type'])).toMatch(/^text\/xml/);
    expect(second.body).toContain('<Reject');
    expect(second.body).not.toContain('<Dial');
    expect((await callStatus(t, id)).status).toBe('dialing');
  });

  it('rejects a voice webhook from another engine or with a caller ID other than the intent\'s', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);

    const fromOther = await requestAndClaim(api, t, agent);
    const other = await signedVoice(t, voiceParams(t, agent, fromOther, 'CA-other-engine', { From: 'client:c2c_eng_someoneelse' }));
    expect(other.status).toBe(200);
    expect(other.body).toContain('<Reject');
    expect(other.body).not.toContain('<Dial');
    expect((await callStatus(t, fromOther)).status).toBe('claimed');
    expect((await api.post(`/calls/${fromOther}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);

    const wrongCallerId = await requestAndClaim(api, t, agent);
    const spoofed = await signedVoice(t, voiceParams(t, agent, wrongCallerId, 'CA-caller-id', { CallerId: '+12025550199' }));
    expect(spoofed.status).toBe(200);
    expect(spoofed.body).toContain('<Reject');
    expect(spoofed.body).not.toContain('<Dial');
    expect((await callStatus(t, wrongCallerId)).status).toBe('claimed');

    // The rightful engine with the frozen caller ID still dials it.
    const rightful = await signedVoice(t, voiceParams(t, agent, wrongCallerId, 'CA-rightful'));
    expect(rightful.body).toContain('<Dial');
    expect((await callStatus(t, wrongCallerId)).status).toBe('dialing');
  });

  it('rejects a voice webhook naming another account as Biz (signed with that account\'s token)', async () => {
    const t = await seedTenant(h.services);
    const stranger = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await requestAndClaim(api, t, agent);
    const params = voiceParams(t, agent, id, 'CA-foreign-biz', { Biz: stranger.accountId });
    const res = await postWebhook(VOICE_PATH, params, sign(await authTokenOf(stranger.accountId), VOICE_PATH, params));
    expect(res.status).toBe(200);
    expect(res.body).toContain('<Reject');
    expect((await callStatus(t, id)).status).toBe('claimed');
  });

  // ---------------------------------------------------------------- status callbacks

  it('moves a call forward only on status callbacks, takes the answer time from Timestamp, and bills once', async () => {
    const t = await seedTenant(h.services, { balanceMicros: 10_000_000 });
    const agent = await realAgent(api, t);
    const id = await requestAndClaim(api, t, agent);
    expect((await signedVoice(t, voiceParams(t, agent, id, 'CA-status'))).body).toContain('<Dial');
    await h.clock.advanceSeconds(5);

    const leg = { CallSid: 'CA-status-leg', ParentCallSid: 'CA-status', Direction: 'outbound-dial', To: US_NUMBER };
    const ringing = await signedStatus(t, id, { ...leg, CallStatus: 'ringing', Timestamp: new Date(h.clock.now()).toUTCString() });
    expect(ringing.status).toBe(204);
    expect((await callStatus(t, id)).status).toBe('ringing');

    // The provider says it answered 2 s ago (a moment in the past is taken as is).
    await h.clock.advanceSeconds(4);
    const answeredMs = h.clock.now() - 2000;
    const answered = await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: new Date(answeredMs).toUTCString() });
    expect(answered.status).toBe(204);
    const connected = await callStatus(t, id);
    expect(connected.status).toBe('connected');
    expect(connected.answered_at).toBe(Math.floor(answeredMs / 1000));

    // A late ringing changes nothing.
    const late = await signedStatus(t, id, { ...leg, CallStatus: 'ringing', Timestamp: new Date(h.clock.now()).toUTCString() });
    expect(late.status).toBe(204);
    expect(await callStatus(t, id)).toMatchObject({ status: 'connected', answered_at: connected.answered_at });

    // A callback with a bad signature is refused and changes nothing.
    const forged = { ...leg, CallStatus: 'completed', Timestamp: new Date(h.clock.now()).toUTCString() };
    await expectError(postWebhook(statusPath(id), forged, 'forged-signature'), 403, 'signature_invalid');
    await expectError(postWebhook(statusPath(id), forged, undefined), 403, 'signature_invalid');
    await expectError(postWebhook(statusPath(id), forged, sign(await authTokenOf(t.accountId), VOICE_PATH, forged)), 403, 'signature_invalid');
    expect((await callStatus(t, id)).status).toBe('connected');

    await h.clock.advanceSeconds(58);
    const done = await signedStatus(t, id, { ...leg, CallStatus: 'completed', CallDuration: '60', Timestamp: new Date(h.clock.now()).toUTCString() });
    expect(done.status).toBe(204);
    const completed = await callStatus(t, id);
    expect(completed).toMatchObject({ status: 'completed', duration: 60 });
    expect(completed.ended_at - completed.answered_at).toBe(60);
    const balance = async () =>
      (await h.services.db.query<{ balance_micros: number }>('SELECT balance_micros FROM accounts WHERE id = $1', [t.accountId]))[0]!.balance_micros;
    // 60 s at 0.01 per minute.
    expect(await balance()).toBe(10_000_000 - 10_000);

    // A duplicate completed (and a late in-progress) bill nothing more and move nothing.
    await h.clock.advanceSeconds(5);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'completed', Timestamp: new Date(h.clock.now()).toUTCString() })).status).toBe(204);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: new Date(h.clock.now()).toUTCString() })).status).toBe(204);
    expect(await callStatus(t, id)).toMatchObject({ status: 'completed', duration: 60, answered_at: completed.answered_at, ended_at: completed.ended_at });
    const ledger = await h.services.db.query('SELECT * FROM wallet_ledger WHERE call_id = $1', [id]);
    expect(ledger).toHaveLength(1);
    expect(await balance()).toBe(10_000_000 - 10_000);
  });

  it('takes the server\'s time as the answer moment when the provider\'s Timestamp is in the future', async () => {
    const t = await seedTenant(h.services);
    const agent = await realAgent(api, t);
    const id = await requestAndClaim(api, t, agent);
    expect((await signedVoice(t, voiceParams(t, agent, id, 'CA-future'))).body).toContain('<Dial');
    await h.clock.advanceSeconds(3);
    const future = new Date(h.clock.now() + 3600_000).toUTCString();
    const res = await signedStatus(t, id, { CallSid: 'CA-future-leg', ParentCallSid: 'CA-future', CallStatus: 'in-progress', Timestamp: future });
    expect(res.status).toBe(204);
    expect(await callStatus(t, id)).toMatchObject({ status: 'connected', answered_at: nowSeconds(), duration: 0 });
  });

  // ---------------------------------------------------------------- incoming calls

  it('rings the ready, registered, available agent with an incoming call, shown to the widget and the engine', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const res = await inbound(t);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ ok: true, direction: 'inbound', status: 'incoming', answered_at: null, ended_at: null });
    expect(res.body.display).toMatchObject({ name: 'Pat', number: UK_NUMBER });
    expect(res.body.request_id).toMatch(/^ci_/);
    const id = res.body.request_id;

    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, direction: 'inbound', status: 'incoming' });
    const beat = await heartbeat(api, agent.engineToken);
    expect(beat.status).toBe(200);
    expect(beat.body.call).toMatchObject({ request_id: id, direction: 'inbound', status: 'incoming' });
  });

  it('answers an incoming call the store failed to route service_unavailable (503: try again), never agent_offline (nobody there)', async () => {
    const t = await seedTenant(h.services);
    await readyAgent(api, t);
    const { db } = h.services;
    // the store stops answering while the agent's coverage is read (a statement timeout)
    const failing = {
      ...db,
      tx: ((fn: Parameters<typeof db.tx>[0], options?: Parameters<typeof db.tx>[1]) =>
        db.tx((sql) => fn({ query: (text: string, params?: readonly unknown[]) => (text.includes('LEFT JOIN LATERAL') ? Promise.reject(new StoreUnavailable({ code: '57014' })) : sql.query(text, params)) } as typeof sql), options)) as typeof db.tx,
    };
    const deps = { ...h.services, db: failing as typeof db };
    await expect(injectInbound(deps, { integrationId: t.integrationId, from: UK_NUMBER })).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(h.services.providers.simulator.liveLegs()).toBe(0); // the leg rung for it is let go
  });

  it('answers an incoming call: the widget command is queued, delivered to the engine and, once acked, connects the call', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = (await inbound(t)).body.request_id;
    await h.clock.advanceSeconds(4);

    const answer = await command(api, agent.widgetToken, { kind: 'answer', request_id: 'answer-1' });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toMatchObject({ ok: true, status: 'queued' });
    expect((await callStatus(t, id)).status).toBe('incoming');

    const beat = await heartbeat(api, agent.engineToken, { call_id: id });
    expect(beat.body.commands).toEqual([expect.objectContaining({ command_id: answer.body.command_id, kind: 'answer', call_id: id })]);

    const acked = await heartbeat(api, agent.engineToken, { call_id: id, acks: [{ command_id: answer.body.command_id, result: 'done' }] });
    expect(acked.status).toBe(200);
    const connected = await callStatus(t, id);
    expect(connected).toMatchObject({ status: 'connected', direction: 'inbound' });
    expect(connected.answered_at).toBe(nowSeconds());
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, status: 'connected' });
    // Acked commands are not handed over again.
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).body.commands).toEqual([]);
  });

  it("answers an incoming call from the window's own Answer button (the CRM need not be open); only the window it rings, only while it rings", async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = (await inbound(t)).body.request_id;
    await h.clock.advanceSeconds(3);
    // not another call, nor one that is not incoming
    await expectError(api.post('/engine/answer', { call_id: 'ci_unknown' }, { auth: agent.engineToken }), 409, 'invalid_state');
    await expectError(api.post('/engine/answer', {}, { auth: agent.engineToken }), 422, 'invalid_request');
    const answered = await api.post('/engine/answer', { call_id: id }, { auth: agent.engineToken });
    expect(answered.status, JSON.stringify(answered.body)).toBe(200);
    expect(answered.body).toMatchObject({ ok: true, call: { request_id: id, status: 'connected', direction: 'inbound' } });
    expect(await callStatus(t, id)).toMatchObject({ status: 'connected', answered_at: nowSeconds() });
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, status: 'connected' });
    // answered already (a real device's answer reported by the provider first, a second click): the call as it is
    expect((await api.post('/engine/answer', { call_id: id }, { auth: agent.engineToken })).body).toMatchObject({ ok: true, call: { status: 'connected' } });
    // the next caller rings Bob (Alex is on a call): Alex's window cannot answer it
    await createMember({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, { email: 'bob@example.com', name: 'Bob', accountId: t.accountId, departmentId: t.salesId });
    await readyAgent(api, t, 'bob@example.com');
    const next = (await inbound(t)).body.request_id;
    await expectError(api.post('/engine/answer', { call_id: next }, { auth: agent.engineToken }), 409, 'invalid_state');
    expect((await callStatus(t, next)).status).toBe('incoming');
  });

  it("ends an answered incoming call at the policy's max_call_seconds, as an outgoing one (spec section 8: the duration cap)", async () => {
    const t = await seedTenant(h.services);
    await setPolicy({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.integrationId, { maxCallSeconds: 120 });
    const agent = await readyAgent(api, t);
    const id = (await inbound(t)).body.request_id;
    const answer = await command(api, agent.widgetToken, { kind: 'answer', request_id: 'answer-capped' });
    await heartbeat(api, agent.engineToken, { call_id: id });
    await heartbeat(api, agent.engineToken, { call_id: id, acks: [{ command_id: answer.body.command_id, result: 'done' }] });
    expect((await callStatus(t, id)).status).toBe('connected');
    await h.clock.advanceSeconds(119);
    await heartbeat(api, agent.engineToken, { call_id: id });
    expect((await callStatus(t, id)).status).toBe('connected');
    await h.clock.advanceSeconds(1);
    expect(await callStatus(t, id)).toMatchObject({ status: 'completed', duration: 120 });
  });

  it('declines an incoming call from the widget: done at once, the call is rejected', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = (await inbound(t)).body.request_id;
    const decline = await command(api, agent.widgetToken, { kind: 'decline', request_id: 'decline-1' });
    expect(decline.status, JSON.stringify(decline.body)).toBe(200);
    expect(decline.body).toMatchObject({ ok: true, status: 'done' });
    const ended = await callStatus(t, id);
    expect(ended).toMatchObject({ status: 'rejected', answered_at: null, ended_at: nowSeconds(), duration: 0 });
    await expectError(command(api, agent.widgetToken, { kind: 'answer', request_id: 'answer-after-decline' }), 409, 'invalid_state');
    // The agent is free again: the next incoming call rings.
    expect((await inbound(t)).status).toBe(201);
  });

  it('answers done to a Decline or Hang up of a ring that ended as the agent clicked, and refuses a Decline of a call that was answered', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = (await inbound(t)).body.request_id;
    await heartbeat(api, agent.engineToken, { call_id: id });
    await h.clock.advanceSeconds(30); // the caller is sent away unanswered as the agent clicks
    expect((await callStatus(t, id)).status).toBe('no_answer');
    expect((await command(api, agent.widgetToken, { kind: 'decline', request_id: 'decline-late', ref: id })).body).toMatchObject({ ok: true, status: 'done' });
    expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-late', ref: id })).body).toMatchObject({ ok: true, status: 'done' });
    expect((await callStatus(t, id)).status).toBe('no_answer'); // as it ended

    // answered, then over: a stale Decline is refused, nothing was declined
    await heartbeat(api, agent.engineToken);
    const rung = await inbound(t);
    expect(rung.status, JSON.stringify(rung.body)).toBe(201);
    const next = rung.body.request_id;
    const answer = await command(api, agent.widgetToken, { kind: 'answer', request_id: 'answer-next', ref: next });
    await heartbeat(api, agent.engineToken, { call_id: next, acks: [{ command_id: answer.body.command_id, result: 'done' }] });
    expect((await callStatus(t, next)).status).toBe('connected');
    expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-next', ref: next })).body).toMatchObject({ ok: true, status: 'done' });
    expect((await callStatus(t, next)).status).toBe('completed');
    await expectError(command(api, agent.widgetToken, { kind: 'decline', request_id: 'decline-answered', ref: next }), 409, 'invalid_state');
  });

  it('ends an incoming call nobody answers after 30 s as no_answer', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = (await inbound(t)).body.request_id;
    await heartbeat(api, agent.engineToken, { call_id: id });
    await h.clock.advanceSeconds(29);
    expect((await callStatus(t, id)).status).toBe('incoming');
    await h.clock.advanceSeconds(1);
    expect((await callStatus(t, id)).status).toBe('no_answer');
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, status: 'no_answer' });
  });

  it('rings the agent idle longest since their last call, whichever window carried it, and not a window gone silent', async () => {
    const t = await seedTenant(h.services);
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    await createMember(deps, { accountId: t.accountId, email: 'bo@acme.example', name: 'Bo', departmentId: t.salesId });
    const bo = await readyAgent(api, t, 'bo@acme.example');
    await h.clock.advanceSeconds(1);
    const ana = await readyAgent(api, t);
    await h.clock.advanceSeconds(1);
    // neither has had a call: Bo's window opened first, his rings; he declines at once
    const first = await inbound(t);
    expect((await state(bo.widgetToken)).call?.request_id).toBe(first.body.request_id);
    expect((await command(api, bo.widgetToken, { kind: 'decline', request_id: 'idle-decline-1' })).body.status).toBe('done');
    await h.clock.advanceSeconds(1);
    // Ana has been idle since her window opened, before Bo's call ended: hers rings
    const second = await inbound(t);
    expect((await state(ana.widgetToken)).call?.request_id).toBe(second.body.request_id);
    expect((await command(api, ana.widgetToken, { kind: 'decline', request_id: 'idle-decline-2' })).body.status).toBe('done');
    await h.clock.advanceSeconds(1);
    // she reloads her window (a new engine, no calls of its own): Bo has still been idle longer
    const anaAgain = await readyAgent(api, t);
    await heartbeat(api, bo.engineToken);
    const third = await inbound(t);
    expect((await state(bo.widgetToken)).call?.request_id).toBe(third.body.request_id);
    expect((await command(api, bo.widgetToken, { kind: 'decline', request_id: 'idle-decline-3' })).body.status).toBe('done');
    // Ana's window then goes silent past LIMITS.engineStaleSeconds (crashed, asleep): Bo's rings, though he had the last call
    await h.clock.advanceSeconds(LIMITS.engineStaleSeconds);
    await heartbeat(api, bo.engineToken);
    const fourth = await inbound(t);
    expect((await state(bo.widgetToken)).call?.request_id).toBe(fourth.body.request_id);
    expect((await state(anaAgain.widgetToken)).call?.request_id).not.toBe(fourth.body.request_id);
  });

  it('refuses an incoming call with 409 agent_offline when no agent is routable', async () => {
    const t = await seedTenant(h.services);
    // No engine at all.
    await openSession(api, t);
    await expectError(inbound(t), 409, 'agent_offline');

    // An engine that never fetched a voice token is not registered with the provider.
    const widgetToken = await openSession(api, t);
    const paired = await api.post('/engine/pair', { ticket: await launchTicket(api, widgetToken), simulated: true });
    expect(paired.status).toBe(201);
    const unregistered = await heartbeat(api, paired.body.engine_token);
    expect(unregistered.body.engine).toMatchObject({ state: 'ready', available: true });
    await expectError(inbound(t), 409, 'agent_offline');

    // Registered, ready, but set unavailable.
    const agent = await readyAgent(api, t);
    const off = await command(api, agent.widgetToken, { kind: 'availability', available: false, request_id: 'avail-off' });
    expect(off.body).toMatchObject({ ok: true, status: 'done' });
    await expectError(inbound(t), 409, 'agent_offline');

    // Available again: it rings.
    const on = await command(api, agent.widgetToken, { kind: 'availability', available: true, request_id: 'avail-on' });
    expect(on.body).toMatchObject({ ok: true, status: 'done' });
    const ringing = await inbound(t);
    expect(ringing.status, JSON.stringify(ringing.body)).toBe(201);
    expect(ringing.body.status).toBe('incoming');
  });

  it('does not ring a window that reports its device not registered (a registration that failed or was lost), and rings it once it reports it is again', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const lost = await heartbeat(api, agent.engineToken, { registered: false });
    expect(lost.status, JSON.stringify(lost.body)).toBe(200);
    expect(lost.body.inbound).toBe(true);
    await expectError(inbound(t), 409, 'agent_offline');
    // a report that says nothing of it (a window of an earlier release) keeps what was known
    await heartbeat(api, agent.engineToken);
    await expectError(inbound(t), 409, 'agent_offline');
    await heartbeat(api, agent.engineToken, { registered: true });
    const ringing = await inbound(t);
    expect(ringing.status, JSON.stringify(ringing.body)).toBe(201);
  });

  it('tells the window in each heartbeat answer whether incoming calls are allowed, as an operator changes it', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    expect((await heartbeat(api, agent.engineToken)).body.inbound).toBe(true);
    await setPolicy({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.integrationId, { inbound: false });
    expect((await heartbeat(api, agent.engineToken)).body.inbound).toBe(false);
  });

  it('gives an agent one call of two incoming calls and an outgoing one arriving together; the others are refused and ring no leg', async () => {
    const t = await seedTenant(h.services);
    await readyAgent(api, t);
    const legsBefore = h.services.providers.simulator.liveLegs();
    // Ringing takes a provider round trip: long enough for the other requests to decide meanwhile.
    const simulator = h.services.providers.simulator;
    const ring = simulator.ringClient.bind(simulator);
    const slowRing = vi.spyOn(simulator, 'ringClient').mockImplementation(async (...args) => {
      await new Promise((resolve) => setTimeout(resolve, 100));
      return ring(...args);
    });
    const [first, second, outgoing] = await Promise.all([inbound(t), inbound(t, { from: US_NUMBER }), requestCall(api, t)]).finally(() => slowRing.mockRestore());
    const won = [first, second, outgoing].filter((reply) => reply.status === 201 || reply.status === 202);
    expect(won, JSON.stringify([first.body, second.body, outgoing.body])).toHaveLength(1);
    for (const reply of [first, second].filter((r) => r.status !== 201)) await expectError(reply, 409, 'agent_offline');
    if (outgoing.status !== 202) expect(outgoing.status).toBe(409);
    const [live] = await h.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM call_intents WHERE integration_id = $1 AND member_id = $2 AND ended_at IS NULL`,
      [t.integrationId, t.agent.id],
    );
    expect(live!.n).toBe(1);
    expect(h.services.providers.simulator.liveLegs() - legsBefore).toBe(won[0] === outgoing ? 0 : 1);
  });

  it('does not put through an incoming call whose integration was disabled while it rang', async () => {
    const t = await seedTenant(h.services);
    await readyAgent(api, t);
    const simulator = h.services.providers.simulator;
    const ring = simulator.ringClient.bind(simulator);
    const slowRing = vi.spyOn(simulator, 'ringClient').mockImplementation(async (...args) => {
      await setIntegrationEnabled({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.integrationId, false);
      return ring(...args);
    });
    try {
      const refused = await inbound(t);
      expect(refused.status).toBe(409);
    } finally {
      slowRing.mockRestore();
    }
    const [calls] = await h.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM call_intents WHERE integration_id = $1', [t.integrationId]);
    expect(calls!.n).toBe(0);
  });

  it('rings an incoming call from the CLI: c2c --json call inbound', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const result = await runCommand(['--json', 'call', 'inbound', '--integration', t.integrationId, '--from', UK_NUMBER], async () => h.services);
    expect(result.code, result.stderr.join('\n')).toBe(0);
    const call = JSON.parse(result.stdout.join('\n'));
    expect(call).toMatchObject({ direction: 'inbound', status: 'incoming' });
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: call.request_id, status: 'incoming' });
  });

  // ---------------------------------------------------------------- widget commands

  it('refuses mute and dtmf with 403 control_not_allowed when the policy lacks them (unmute is never refused for it)', async () => {
    const t = await seedTenant(h.services);
    await setPolicy({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.integrationId, { controls: [] });
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);
    expect((await state(agent.widgetToken)).policy.controls).toEqual([]);

    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 'nc-mute' }), 403, 'control_not_allowed');
    await expectError(command(api, agent.widgetToken, { kind: 'dtmf', digits: '1', request_id: 'nc-dtmf' }), 403, 'control_not_allowed');
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).body.commands).toEqual([]);
    // an agent muted before mute was taken away can always be heard again
    const unmute = await command(api, agent.widgetToken, { kind: 'unmute', request_id: 'nc-unmute' });
    expect(unmute.body).toMatchObject({ ok: true, status: 'queued' });
    expect(h.services.providers.simulator.digitsHeard((await intentRow(id)).provider_call_sid!)).toBe('');
  });

  it("judges in-call controls on the agent's policy as the widget shows it, when the operator changes it mid-call", async () => {
    const t = await seedTenant(h.services);
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    await setPolicy(deps, t.integrationId, { controls: ['mute'] });
    const agent = await readyAgent(api, t);
    await connectedCall(t, agent);
    // DTMF switched on during the call: the widget now offers the keypad, and its digits go through
    await setPolicy(deps, t.integrationId, { controls: ['mute', 'dtmf'] });
    expect((await state(agent.widgetToken)).policy.controls).toEqual(['mute', 'dtmf']);
    expect((await command(api, agent.widgetToken, { kind: 'dtmf', digits: '5', request_id: 'mid-dtmf' })).body).toMatchObject({ ok: true, status: 'queued' });
    // mute switched off during the call: the widget no longer offers it, and it is refused
    await setPolicy(deps, t.integrationId, { controls: ['dtmf'] });
    expect((await state(agent.widgetToken)).policy.controls).toEqual(['dtmf']);
    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 'mid-mute' }), 403, 'control_not_allowed');
    // but an agent muted before it is never left unheard: unmute is taken
    expect((await command(api, agent.widgetToken, { kind: 'unmute', request_id: 'mid-unmute' })).body).toMatchObject({ ok: true, status: 'queued' });
    // and the window learns the controls with its next heartbeat, so its own Mute follows them too
    expect((await heartbeat(api, agent.engineToken)).body.controls).toEqual(['dtmf']);
  });

  it('queues mute, unmute, dtmf and focus for the engine; an acked dtmf is heard by the far end', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);

    const mute = await command(api, agent.widgetToken, { kind: 'mute', request_id: 'c-mute' });
    expect(mute.status, JSON.stringify(mute.body)).toBe(200);
    expect(mute.body).toMatchObject({ ok: true, status: 'queued' });
    const unmute = await command(api, agent.widgetToken, { kind: 'unmute', request_id: 'c-unmute' });
    expect(unmute.body).toMatchObject({ ok: true, status: 'queued' });
    const dtmf = await command(api, agent.widgetToken, { kind: 'dtmf', digits: '12#', request_id: 'c-dtmf' });
    expect(dtmf.body).toMatchObject({ ok: true, status: 'queued' });
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'c-focus' });
    expect(focus.body).toMatchObject({ ok: true, status: 'queued' });

    const beat = await heartbeat(api, agent.engineToken, { call_id: id });
    expect(beat.body.commands).toEqual([
      expect.objectContaining({ command_id: mute.body.command_id, kind: 'mute', call_id: id }),
      expect.objectContaining({ command_id: unmute.body.command_id, kind: 'unmute', call_id: id }),
      expect.objectContaining({ command_id: dtmf.body.command_id, kind: 'dtmf', call_id: id, digits: '12#' }),
      expect.objectContaining({ command_id: focus.body.command_id, kind: 'focus' }),
    ]);

    const sid = (await intentRow(id)).provider_call_sid!;
    expect(h.services.providers.simulator.digitsHeard(sid)).toBe('');
    const acks = [mute, unmute, dtmf, focus].map((c) => ({ command_id: c.body.command_id, result: 'done' as const }));
    expect((await heartbeat(api, agent.engineToken, { call_id: id, acks })).status).toBe(200);
    expect(h.services.providers.simulator.digitsHeard(sid)).toBe('12#');
    // A repeated ack does not send the digits twice.
    await heartbeat(api, agent.engineToken, { call_id: id, acks });
    expect(h.services.providers.simulator.digitsHeard(sid)).toBe('12#');
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).body.commands).toEqual([]);
  });

  it('hands an unacked command over again in every heartbeat over REST until it is acked', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'lost-answer' });
    const ids = (beat: { body: { commands: Array<{ command_id: number }> } }) => beat.body.commands.map((c) => c.command_id);
    // the answer carrying it is lost: the window never acks. Over REST nothing else can be on its
    // way to the window, so the next heartbeat, however soon, carries it again.
    expect(ids(await heartbeat(api, agent.engineToken))).toEqual([focus.body.command_id]);
    expect(ids(await heartbeat(api, agent.engineToken))).toEqual([focus.body.command_id]);
    await h.clock.advance(LIMITS.heartbeatFallbackMs);
    const acked = await heartbeat(api, agent.engineToken, { acks: [{ command_id: focus.body.command_id, result: 'done' }] });
    expect(ids(acked)).toEqual([]);
    await h.clock.advance(LIMITS.heartbeatFallbackMs);
    expect(ids(await heartbeat(api, agent.engineToken))).toEqual([]);
    const [row] = await h.services.db.query<{ deliveries: number; status: string }>('SELECT deliveries, status FROM widget_commands WHERE id = $1', [focus.body.command_id]);
    expect(row).toEqual({ deliveries: 2, status: 'done' });
  });

  it('shows the engine\'s reported mute in the widget state', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);
    expect((await state(agent.widgetToken)).engine?.muted).toBe(false);
    await heartbeat(api, agent.engineToken, { call_id: id, muted: true });
    expect((await state(agent.widgetToken)).engine?.muted).toBe(true);
    await heartbeat(api, agent.engineToken, { call_id: id, muted: false });
    expect((await state(agent.widgetToken)).engine?.muted).toBe(false);
  });

  it('refuses malformed dtmf with 422 invalid_request', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);
    await expectError(command(api, agent.widgetToken, { kind: 'dtmf', request_id: 'd-none' }), 422, 'invalid_request');
    await expectError(command(api, agent.widgetToken, { kind: 'dtmf', digits: 'abc', request_id: 'd-abc' }), 422, 'invalid_request');
    // a pause is a lower-case w, as Twilio's sendDigits takes it (it throws on an upper-case W, which the window would report as failed)
    await expectError(command(api, agent.widgetToken, { kind: 'dtmf', digits: '1W2', request_id: 'd-W' }), 422, 'invalid_request');
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).body.commands).toEqual([]);
    expect((await command(api, agent.widgetToken, { kind: 'dtmf', digits: '1w2', request_id: 'd-w' })).body).toMatchObject({ ok: true, status: 'queued' });
  });

  it('refuses mute, answer and hangup with 409 invalid_state when there is no fitting call', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 's-mute' }), 409, 'invalid_state');
    await expectError(command(api, agent.widgetToken, { kind: 'answer', request_id: 's-answer' }), 409, 'invalid_state');
    await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 's-hangup' }), 409, 'invalid_state');
    await expectError(command(api, agent.widgetToken, { kind: 'decline', request_id: 's-decline' }), 409, 'invalid_state');

    // An outgoing call is not an incoming one: answer is still refused, mute too until it connects.
    const id = await requestAndClaim(api, t, agent);
    await heartbeat(api, agent.engineToken, { call_id: id });
    await expectError(command(api, agent.widgetToken, { kind: 'answer', request_id: 's-answer-2' }), 409, 'invalid_state');
    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 's-mute-2' }), 409, 'invalid_state');
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).body.commands).toEqual([]);
  });

  it('answers a replayed request_id with the first result without a second row, refusals included', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);

    // A refusal replayed after the state changed is refused again with the same code.
    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 'rp-refused' }), 409, 'invalid_state');
    const id = await connectedCall(t, agent);
    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 'rp-refused' }), 409, 'invalid_state');
    expect(await commandRows(t, 'rp-refused')).toBe(1);

    const first = await command(api, agent.widgetToken, { kind: 'mute', request_id: 'rp-mute' });
    expect(first.body).toMatchObject({ ok: true, status: 'queued' });
    const replay = await command(api, agent.widgetToken, { kind: 'mute', request_id: 'rp-mute' });
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(first.body);
    expect(await commandRows(t, 'rp-mute')).toBe(1);
    const beat = await heartbeat(api, agent.engineToken, { call_id: id });
    expect(beat.body.commands.filter((c: { kind: string }) => c.kind === 'mute')).toHaveLength(1);

    // A replayed dtmf after its ack sends no digits again.
    const dtmf = await command(api, agent.widgetToken, { kind: 'dtmf', digits: '7', request_id: 'rp-dtmf' });
    await heartbeat(api, agent.engineToken, { call_id: id, acks: [{ command_id: dtmf.body.command_id, result: 'done' }] });
    const dtmfReplay = await command(api, agent.widgetToken, { kind: 'dtmf', digits: '7', request_id: 'rp-dtmf' });
    expect(dtmfReplay.body).toEqual(dtmf.body);
    expect(await commandRows(t, 'rp-dtmf')).toBe(1);
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).body.commands.filter((c: { kind: string }) => c.kind === 'dtmf')).toEqual([]);
    expect(h.services.providers.simulator.digitsHeard((await intentRow(id)).provider_call_sid!)).toBe('7');
  });

  it('refuses a request_id seen before that now names another command (409 idempotency_conflict), rather than dropping it with the first answer', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);
    const muted = await command(api, agent.widgetToken, { kind: 'mute', request_id: 'reused-1' });
    expect(muted.body).toMatchObject({ ok: true, status: 'queued' });
    const hangup = await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 'reused-1' }), 409, 'idempotency_conflict');
    expect(hangup.body.message).toContain('(mute)');
    // the same kind for another call (ref) is another command too
    await expectError(command(api, agent.widgetToken, { kind: 'mute', request_id: 'reused-1', ref: 'ci_another' }), 409, 'idempotency_conflict');
    expect((await command(api, agent.widgetToken, { kind: 'mute', request_id: 'reused-1', ref: id })).body).toEqual(muted.body);
    const digits = await command(api, agent.widgetToken, { kind: 'dtmf', digits: '1', request_id: 'reused-2' });
    expect(digits.body).toMatchObject({ ok: true });
    await expectError(command(api, agent.widgetToken, { kind: 'dtmf', digits: '2', request_id: 'reused-2' }), 409, 'idempotency_conflict');
    // a refusal's id too: the refused mute's id does not answer a hangup with "no connected call"
    await expectError(command(api, agent.widgetToken, { kind: 'unmute', digits: undefined, request_id: 'reused-3', ref: 'ci_elsewhere' }), 409, 'invalid_state');
    await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 'reused-3' }), 409, 'idempotency_conflict');
    // nothing of the conflicting ones was recorded or carried out: one row each, the call still up
    expect([await commandRows(t, 'reused-1'), await commandRows(t, 'reused-2')]).toEqual([1, 1]);
    expect((await intentRow(id)).status).toBe('connected');
    // the same command again is still a replay
    expect((await command(api, agent.widgetToken, { kind: 'mute', request_id: 'reused-1' })).body).toEqual(muted.body);
  });

  it('executes one of many concurrent requests with the same request_id; every one gets its answer', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);

    const answers = await Promise.all(Array.from({ length: 12 }, () => command(api, agent.widgetToken, { kind: 'mute', request_id: 'race-mute' })));
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    expect(new Set(answers.map((a) => JSON.stringify(a.body))).size).toBe(1);
    expect(answers[0]!.body).toMatchObject({ ok: true, status: 'queued' });
    expect(await commandRows(t, 'race-mute')).toBe(1);
    const beat = await heartbeat(api, agent.engineToken, { call_id: id });
    expect(beat.body.commands.filter((c: { kind: string }) => c.kind === 'mute')).toHaveLength(1);

    const toggles = await Promise.all(Array.from({ length: 12 }, () => command(api, agent.widgetToken, { kind: 'availability', available: false, request_id: 'race-av' })));
    expect(new Set(toggles.map((a) => JSON.stringify(a.body))).size).toBe(1);
    expect(toggles[0]!.body).toMatchObject({ ok: true, status: 'done' });
    expect(await commandRows(t, 'race-av')).toBe(1);
    expect((await state(agent.widgetToken)).engine?.available).toBe(false);
  });

  it('sets availability at once (done) and GET /widget/state follows', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    expect((await state(agent.widgetToken)).engine?.available).toBe(true);

    const off = await command(api, agent.widgetToken, { kind: 'availability', available: false, request_id: 'av-1' });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body).toMatchObject({ ok: true, status: 'done' });
    expect((await state(agent.widgetToken)).engine?.available).toBe(false);

    const on = await command(api, agent.widgetToken, { kind: 'availability', available: true, request_id: 'av-2' });
    expect(on.body).toMatchObject({ ok: true, status: 'done' });
    expect((await state(agent.widgetToken)).engine?.available).toBe(true);

    // Replaying the first one does not switch it off again.
    const replay = await command(api, agent.widgetToken, { kind: 'availability', available: false, request_id: 'av-1' });
    expect(replay.body).toEqual(off.body);
    expect((await state(agent.widgetToken)).engine?.available).toBe(true);
    expect(await commandRows(t, 'av-1')).toBe(1);
  });

  // ---------------------------------------------------------------- widget session endpoints

  it('refreshes the widget token: the new one works, the old one for 30 s more only', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const old = agent.widgetToken;
    const refreshed = await api.post('/widget/refresh', undefined, { auth: old, origin: 'https://crm.example.com' });
    expect(refreshed.status, JSON.stringify(refreshed.body)).toBe(200);
    expect(refreshed.body.ok).toBe(true);
    const fresh: string = refreshed.body.widget_token;
    expect(fresh).toMatch(/^c2cw_/);
    expect(fresh).not.toBe(old);
    expect(refreshed.body.expires_at).toBe(nowSeconds() + 30 * 60);

    expect((await widgetState(api, fresh)).status).toBe(200);
    expect((await widgetState(api, old)).status).toBe(200);
    // the old token lives 30 s more: good a moment before, dead at
    await h.clock.advance(29_999);
    expect((await widgetState(api, old)).status).toBe(200);
    await h.clock.advance(1);
    await expectError(widgetState(api, old), 401, 'unauthorized');
    expect((await widgetState(api, fresh)).status).toBe(200);
    const viaFresh = await command(api, fresh, { kind: 'focus', request_id: 'rf-focus' });
    expect(viaFresh.body).toMatchObject({ ok: true, status: 'queued' });
  });

  it('keeps one token of full life per session: a token refreshed again and again in its grace makes new tokens, each cutting the last to the grace', async () => {
    const t = await seedTenant(h.services);
    const old = await openSession(api, t);
    const refresh = async (token: string) => {
      const answer = await api.post('/widget/refresh', undefined, { auth: token, origin: 'https://crm.example.com' });
      expect(answer.status, JSON.stringify(answer.body)).toBe(200);
      return answer.body.widget_token as string;
    };
    // the same old token refreshed three times (a client, or a script, asking again within the grace)
    const minted = [await refresh(old), await refresh(old), await refresh(old)];
    await h.clock.advanceSeconds(31);
    // only the newest lives on: the others ended with the grace, as the old one did
    for (const token of [old, ...minted.slice(0, 2)]) await expectError(widgetState(api, token), 401, 'unauthorized');
    expect((await widgetState(api, minted[2]!)).status).toBe(200);
  });

  it('revokes the widget session: the token is then 401, the ongoing call stays connected', async () => {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const id = await connectedCall(t, agent);

    const revoked = await api.post('/widget/revoke', undefined, { auth: agent.widgetToken, origin: 'https://crm.example.com' });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect(revoked.body).toEqual({ ok: true, revoked: true });

    await expectError(widgetState(api, agent.widgetToken), 401, 'unauthorized');
    await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 'rv-hangup' }), 401, 'unauthorized');
    await expectError(api.post('/widget/refresh', undefined, { auth: agent.widgetToken, origin: 'https://crm.example.com' }), 401, 'unauthorized');

    await h.clock.advanceSeconds(10);
    const beat = await heartbeat(api, agent.engineToken, { call_id: id });
    expect(beat.body.call).toMatchObject({ request_id: id, status: 'connected' });
    expect(await callStatus(t, id)).toMatchObject({ status: 'connected', duration: 10 });
  });
});
