/**
 * The Twilio driver (api/providers/twilio/), which this machine cannot test against Twilio: its
 * access tokens are checked as Twilio checks them (an HS256 JWT signed with the API key's secret,
 * issued by the key for the account, with the voice grant), verified here with node:crypto rather
 * than the library that made them; its hangups go to a local server standing in for Twilio's REST
 * endpoint. Then a whole call through the API with VOICE_PROVIDER=twilio: the test plays Twilio's
 * webhooks (signed with the library's own code), and the widget's hangup reaches the stand-in.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { ManualClock } from '../../api/clock.js';
import { loadConfig } from '../../api/config.js';
import { createMember, setAccountProvider } from '../../api/domain/operator/accounts.js';
import { ABANDONED_HANGUP_RETRY, createReaper, PROVIDER_FINAL_CALLBACK_GRACE_SECONDS, PROVIDER_RECHECK_SECONDS, PROVIDER_RECORD_PATIENCE_SECONDS, PROVIDER_REQUESTS_AT_ONCE } from '../../api/domain/reaper.js';
import { createProviders, ProviderUnavailable, ProviderUnreachable, type ProviderAccount } from '../../api/providers/index.js';
import { simulatedTokenKey } from '../../api/providers/simulated/simulator.js';
import { TwilioProvider } from '../../api/providers/twilio/twilio.js';
import { PROVIDER_PATHS } from '../../api/providers/twiml.js';
import { LIMITS } from '../../shared/limits.js';
import { engineIdentity } from '../../shared/prefixes.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, heartbeat, launchTicket, openSession, readyAgent, widgetState } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { providerWebhooks, requestAndClaim } from '../helpers/provider.js';
import { CALLER_ID, seedTenant, US_NUMBER, type Tenant } from '../helpers/tenant.js';
import { callList, completedCall, startTwilioStandIn, TWILIO, twilioError, type TwilioAnswer, type TwilioRequest, type TwilioStandIn } from '../helpers/twilio-stand-in.js';

const { accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN, twimlAppSid: APP_SID } = TWILIO;
const { sid: KEY_SID, secret: KEY_SECRET } = TWILIO.apiKey;
const account: ProviderAccount = {
  accountId: 'acc_twilio',
  accountSid: ACCOUNT_SID,
  authToken: AUTH_TOKEN,
  apiKey: { sid: KEY_SID, secret: KEY_SECRET },
  twimlAppSid: APP_SID,
};

/** The time limit a <Dial> was given (the wallet's share decides it): the rest of the TwiML is fixed. */
const voiceTimeLimit = (twiml: string) => /timeLimit="(\d+)"/.exec(twiml)?.[1];

/** The JWT's header and claims once its HS256 signature checks out with the secret; throws otherwise. */
function verifiedJwt(jwt: string, secret: string): { header: Record<string, unknown>; claims: Record<string, any> } {
  const [header, payload, signature] = jwt.split('.');
  const expected = createHmac('sha256', secret).update(`${header}.${payload}`).digest();
  const given = Buffer.from(signature!, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new Error('signature does not verify');
  const decode = (part: string) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  return { header: decode(header!), claims: decode(payload!) };
}

describe('the Twilio driver', () => {
  let standIn: TwilioStandIn;
  let twilio: TwilioProvider;
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    standIn = await startTwilioStandIn();
    twilio = new TwilioProvider(clock, { apiBaseUrl: standIn.url, timeoutMs: 300 });
  });
  afterAll(() => standIn.close());
  beforeEach(() => {
    standIn.requests.length = 0;
    standIn.answer(completedCall);
  });

  it("issues an access token Twilio accepts: HS256, signed with the API key's secret, for the identity, with the voice grant through the TwiML App", async () => {
    const issued = await twilio.accessToken(account, 'c2c_eng_1', 3600);
    const { header, claims } = verifiedJwt(issued.token, KEY_SECRET);
    expect(header).toMatchObject({ alg: 'HS256', typ: 'JWT', cty: 'twilio-fpa;v=1' });
    expect(claims).toMatchObject({
      iss: KEY_SID,
      sub: ACCOUNT_SID,
      grants: { identity: 'c2c_eng_1', voice: { incoming: { allow: true }, outgoing: { application_sid: APP_SID } } },
    });
    expect(claims.exp - claims.iat).toBe(3600);
    expect(Math.abs(claims.iat * 1000 - Date.now())).toBeLessThan(60_000);
    expect(issued.expiresAt).toBe(clock.now() + 3600 * 1000);
    expect(() => verifiedJwt(issued.token, AUTH_TOKEN)).toThrow();
  });

  it("signs a simulated window's token (a CI run's, on an account with real Twilio credentials) with a key derived from the auth token, never the auth token itself", async () => {
    const simulator = createProviders(loadConfig({ LOG_LEVEL: 'silent' }, { voiceProvider: 'twilio' }), clock).simulator;
    const { token } = await simulator.accessToken(account, 'c2c_eng_sim', 600);
    expect(() => verifiedJwt(token, AUTH_TOKEN)).toThrow();
    expect(verifiedJwt(token, simulatedTokenKey(account)).claims.grants).toMatchObject({ identity: 'c2c_eng_sim' });
  });

  it('refuses a token for an account without its API key or TwiML App, naming what to set', async () => {
    for (const incomplete of [{ ...account, apiKey: null }, { ...account, twimlAppSid: null }]) {
      await expect(twilio.accessToken(incomplete, 'c2c_eng_1', 3600)).rejects.toThrow(ProviderUnavailable);
      await expect(twilio.accessToken(incomplete, 'c2c_eng_1', 3600)).rejects.toThrow(/set-provider/);
    }
  });

  it("ends a call by updating the call resource to completed, with the account's credentials", async () => {
    await twilio.hangup(account, 'CAparent1');
    expect(standIn.requests).toEqual([
      { method: 'POST', path: `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAparent1.json`, user: ACCOUNT_SID, password: AUTH_TOKEN, form: { Status: 'completed' } },
    ]);
  });

  it('ends a Twilio call at Twilio on a node started VOICE_PROVIDER=simulated too (a rollback, a fleet half way through a change), never by the simulator', async () => {
    const config = loadConfig({ LOG_LEVEL: 'silent' }, { voiceProvider: 'simulated', twilioApiBaseUrl: standIn.url, twilioTimeoutMs: 300 });
    const providers = createProviders(config, clock);
    expect(providers.configured).toBe(providers.simulator);
    await providers.byName('twilio').hangup(account, 'CAparent2');
    expect(standIn.requests).toEqual([
      { method: 'POST', path: `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAparent2.json`, user: ACCOUNT_SID, password: AUTH_TOKEN, form: { Status: 'completed' } },
    ]);
    // and when Twilio cannot confirm it, the hangup is uncertain (502), not done
    standIn.answer(() => twilioError(503, 20503, 'Service Unavailable'));
    await expect(providers.byName('twilio').hangup(account, 'CAparent2')).rejects.toBeInstanceOf(ProviderUnreachable);
  });

  it('counts a call Twilio no longer has, or that can no longer change, as ended already: a retried hangup succeeds', async () => {
    await expect(twilio.hangup(account, 'CAlive')).resolves.toBe('ended');
    standIn.answer(() => twilioError(404, 20404, 'The requested resource was not found'));
    await expect(twilio.hangup(account, 'CAgone')).resolves.toBe('ended-already');
    standIn.answer(() => twilioError(400, 21220, 'Call is not in-progress. Cannot redirect.'));
    await expect(twilio.hangup(account, 'CAended')).resolves.toBe('ended-already');
  });

  it("reads a call's record from the call resource, with the account's credentials: its status, end time and talk time once ended; none while it runs", async () => {
    standIn.answer((request) => ({
      status: 200,
      body: {
        sid: 'CAleg1',
        parent_call_sid: 'CAparent1',
        account_sid: request.user,
        status: 'completed',
        start_time: 'Fri, 27 Nov 2026 21:00:00 +0000',
        end_time: 'Fri, 27 Nov 2026 21:01:40 +0000',
        duration: '95',
      },
    }));
    expect(await twilio.callRecord(account, 'CAleg1')).toEqual({
      callSid: 'CAleg1',
      parentCallSid: 'CAparent1',
      status: 'completed',
      endedAt: Date.UTC(2026, 10, 27, 21, 1, 40),
      durationSeconds: 95,
    });
    expect(standIn.requests).toEqual([{ method: 'GET', path: `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAleg1.json`, user: ACCOUNT_SID, password: AUTH_TOKEN, form: {} }]);
    standIn.answer(() => ({ status: 200, body: { sid: 'CAleg2', parent_call_sid: null, status: 'in-progress', end_time: null, duration: null } }));
    expect(await twilio.callRecord(account, 'CAleg2')).toEqual({ callSid: 'CAleg2', parentCallSid: null, status: 'in-progress', endedAt: null, durationSeconds: null });
    // an unanswered leg has no end_time: it ended when Twilio last updated it
    standIn.answer(() => ({ status: 200, body: { sid: 'CAleg4', status: 'no-answer', end_time: null, date_updated: 'Fri, 27 Nov 2026 21:00:31 +0000', duration: '0' } }));
    expect(await twilio.callRecord(account, 'CAleg4')).toMatchObject({ status: 'no-answer', endedAt: Date.UTC(2026, 10, 27, 21, 0, 31), durationSeconds: 0 });
    // a status Twilio may add later tells nothing: no record to go by
    standIn.answer(() => ({ status: 200, body: { sid: 'CAleg3', status: 'transferring', end_time: null, duration: null } }));
    expect(await twilio.callRecord(account, 'CAleg3')).toBeNull();
  });

  it('reads no record of a call Twilio does not have, and says unreachable, without the credentials, when Twilio cannot answer', async () => {
    standIn.answer(() => twilioError(404, 20404, 'The requested resource was not found'));
    expect(await twilio.callRecord(account, 'CAunknown')).toBeNull();
    // Twilio refusing the account (its credentials, a suspension, its API concurrency exceeded: 20429) is that account's trouble; a 5xx or no answer is Twilio's
    const failures = [
      { answer: () => twilioError(500, 20500, 'Internal Server Error'), accountOnly: false },
      { answer: () => twilioError(429, 20429, 'Too Many Requests'), accountOnly: true },
      { answer: () => 'hang' as const, accountOnly: false },
      { answer: () => twilioError(401, 20003, 'Authenticate'), accountOnly: true },
    ];
    for (const failure of failures) {
      standIn.answer(failure.answer);
      const error = await twilio.callRecord(account, 'CAfail').then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderUnreachable);
      expect(error).toMatchObject({ accountOnly: failure.accountOnly });
      expect((error as Error).message).toContain('CAfail');
      expect((error as Error).message).not.toContain(AUTH_TOKEN);
    }
  });

  it("finds the leg a parent dialed by listing the account's calls with that ParentCallSid: the newest, as its record; none when it dialed none; unreachable as for a record", async () => {
    const leg = (sid: string, created: string, status: string) => ({
      sid,
      parent_call_sid: 'CAwindow1',
      account_sid: ACCOUNT_SID,
      status,
      date_created: created,
      date_updated: 'Fri, 27 Nov 2026 21:03:00 +0000',
      end_time: status === 'completed' ? 'Fri, 27 Nov 2026 21:02:10 +0000' : null,
      duration: status === 'completed' ? '70' : null,
    });
    // Twilio's list page: the calls, and its paging fields (no next page)
    standIn.answer(() => callList([leg('CAolder', 'Fri, 27 Nov 2026 20:50:00 +0000', 'no-answer'), leg('CAnewer', 'Fri, 27 Nov 2026 21:00:00 +0000', 'completed')]));
    expect(await twilio.dialedLegRecord(account, 'CAwindow1')).toEqual({
      callSid: 'CAnewer',
      parentCallSid: 'CAwindow1',
      status: 'completed',
      endedAt: Date.UTC(2026, 10, 27, 21, 2, 10),
      durationSeconds: 70,
    });
    expect(standIn.requests).toEqual([
      { method: 'GET', path: `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls.json?ParentCallSid=CAwindow1&PageSize=20`, user: ACCOUNT_SID, password: AUTH_TOKEN, form: {} },
    ]);
    // one identity rang on two devices (a window open twice): the leg that carried the call, though made first
    standIn.answer(() => callList([leg('CAtalked', 'Fri, 27 Nov 2026 20:59:00 +0000', 'completed'), leg('CAcanceled', 'Fri, 27 Nov 2026 21:00:00 +0000', 'canceled')]));
    expect(await twilio.dialedLegRecord(account, 'CAwindow1')).toMatchObject({ callSid: 'CAtalked', status: 'completed' });
    standIn.answer(() => callList([]));
    expect(await twilio.dialedLegRecord(account, 'CAwindow2')).toBeNull();
    // a caller's leg rang several windows: the one asked for is told by its client
    standIn.requests.length = 0;
    expect(await twilio.dialedLegRecord(account, 'CAcaller1', 'client:c2c_eng_1')).toBeNull();
    expect(Object.fromEntries(new URL(standIn.requests[0]!.path, 'http://x').searchParams)).toEqual({ ParentCallSid: 'CAcaller1', To: 'client:c2c_eng_1', PageSize: '20' });
    standIn.answer(() => twilioError(401, 20003, 'Authenticate'));
    const refused = await twilio.dialedLegRecord(account, 'CAwindow3').then(() => null, (e: unknown) => e);
    expect(refused).toBeInstanceOf(ProviderUnreachable);
    expect(refused).toMatchObject({ accountOnly: true });
    expect((refused as Error).message).toContain('CAwindow3');
    expect((refused as Error).message).not.toContain(AUTH_TOKEN);
    standIn.answer(() => 'hang');
    await expect(twilio.dialedLegRecord(account, 'CAwindow4')).rejects.toMatchObject({ accountOnly: false });
  });

  it('says unreachable, never ended, when Twilio fails, refuses the credentials, takes too long or cannot be reached, without the credentials in the message', async () => {
    const failures = [
      () => twilioError(500, 20500, 'Internal Server Error'),
      () => twilioError(401, 20003, 'Authenticate'),
      () => twilioError(429, 20429, 'Too Many Requests'),
      () => 'hang' as const,
    ];
    for (const failure of failures) {
      standIn.answer(failure);
      const error = await twilio.hangup(account, 'CAfail').then(() => null, (e: unknown) => e);
      expect(error).toBeInstanceOf(ProviderUnreachable);
      expect((error as Error).message).toContain('CAfail');
      expect(JSON.stringify(error) + (error as Error).message + String((error as Error).cause ?? '')).not.toContain(AUTH_TOKEN);
    }
    const unreachable = new TwilioProvider(clock, { apiBaseUrl: 'http://127.0.0.1:9', timeoutMs: 300 });
    await expect(unreachable.hangup(account, 'CAfail')).rejects.toThrow(ProviderUnreachable);
  });
});

describe.each(storeDrivers())('a call through the API with VOICE_PROVIDER=twilio on %s', (driver) => {
  let standIn: TwilioStandIn;
  let h: Harness;
  let api: Client;

  beforeAll(async () => {
    standIn = await startTwilioStandIn();
    // demo: the simulated incoming-call route is there beside Twilio, as in a demo deployment
    h = await createHarness(driver, { voiceProvider: 'twilio', twilioApiBaseUrl: standIn.url, twilioTimeoutMs: 300, demo: true });
    api = client(h.app);
  });
  afterAll(async () => {
    await h.close();
    await standIn.close();
  });

  const { signedVoice, signedStatus } = providerWebhooks(() => h, () => api);

  async function twilioTenant(credentials: { apiKey?: { sid: string; secret: string }; twimlAppSid?: string } = { apiKey: { sid: KEY_SID, secret: KEY_SECRET }, twimlAppSid: APP_SID }) {
    const t = await seedTenant(h.services);
    await setAccountProvider(h.services, t.accountId, { accountSid: ACCOUNT_SID, authToken: AUTH_TOKEN, ...credentials });
    return t;
  }

  /** A real window's call, dialed: Twilio asked the TwiML App's voice URL with `parent` as the window's leg. */
  async function dialedCall(parent: string) {
    const t = await twilioTenant();
    const agent = await readyAgent(api, t, t.agent.email, false);
    const id = await requestAndClaim(api, t, agent);
    expect((await signedVoice(t, { CallSid: parent, From: `client:${engineIdentity(agent.engineId)}`, To: id, Biz: t.accountId, CallerId: CALLER_ID, AccountSid: ACCOUNT_SID })).status).toBe(200);
    return { t, agent, id };
  }

  it("pairs a real window on Twilio, gives it Twilio's token for its identity, dials through <Dial>, and ends the call through Twilio's REST API on the widget's hangup", async () => {
    const t = await twilioTenant();
    const agent = await readyAgent(api, t, t.agent.email, false);
    const token = await api.post('/engine/voice-token', undefined, { auth: agent.engineToken });
    expect(token.body).toMatchObject({ ok: true, provider: 'twilio', identity: engineIdentity(agent.engineId) });
    expect(verifiedJwt(token.body.token, KEY_SECRET).claims.grants).toMatchObject({
      identity: engineIdentity(agent.engineId),
      voice: { outgoing: { application_sid: APP_SID } },
    });

    // Twilio, told by the window's Device.connect({params}), asks the TwiML App's voice URL.
    const id = await requestAndClaim(api, t, agent);
    const voice = await signedVoice(t, { CallSid: 'CAparent', From: `client:${engineIdentity(agent.engineId)}`, To: id, Biz: t.accountId, CallerId: CALLER_ID, AccountSid: ACCOUNT_SID });
    expect(voice.status).toBe(200);
    // All of it: without `answered` among the events, Twilio would never say the call was answered.
    expect(voice.body).toBe(
      `<?xml version="1.0" encoding="UTF-8"?><Response><Dial callerId="${CALLER_ID}" timeLimit="${voiceTimeLimit(voice.body)}" answerOnBridge="true">` +
        `<Number statusCallback="${h.config.publicBaseUrl}${PROVIDER_PATHS.status}?intent=${id}" statusCallbackEvent="initiated ringing answered completed" statusCallbackMethod="POST">${US_NUMBER}</Number></Dial></Response>`,
    );
    const leg = { CallSid: 'CAchild', ParentCallSid: 'CAparent', AccountSid: ACCOUNT_SID };
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'ringing' })).status).toBe(204);
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress' })).status).toBe(204);
    expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'connected' });

    // Twilio failing: the hangup is uncertain, and the call is not recorded ended.
    standIn.answer(() => twilioError(503, 20503, 'Service Unavailable'));
    await expectError(command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-twilio-1' }), 502, 'hangup_uncertain');
    expect((await widgetState(api, agent.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'connected' });
    // and the operator sees it
    expect(await h.services.metrics.registry.getSingleMetricAsString('c2c_provider_hangup_failures_total')).toContain('c2c_provider_hangup_failures_total{provider="twilio"} 1');

    standIn.answer(completedCall);
    standIn.requests.length = 0;
    const hangup = await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-twilio-2' });
    expect(hangup.status, JSON.stringify(hangup.body)).toBe(200);
    expect(standIn.requests).toEqual([
      { method: 'POST', path: `/2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAparent.json`, user: ACCOUNT_SID, password: AUTH_TOKEN, form: { Status: 'completed' } },
    ]);
    // Twilio's own callback for the hangup it carried out changes nothing further.
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'completed', CallDuration: '7' })).status).toBe(204);
    const ended = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(ended.body).toMatchObject({ request_id: id, status: 'completed' });
  });

  it("settles a call whose completed never came, once the window lets go of it, from Twilio's record of the dialed leg: its end and talk time", async () => {
    const { t, agent, id } = await dialedCall('CAparent2');
    const leg = { CallSid: 'CAchild2', ParentCallSid: 'CAparent2', AccountSid: ACCOUNT_SID };
    await h.clock.advance(1000 - (h.clock.now() % 1000)); // Twilio's timestamps have whole seconds
    const answeredAt = h.clock.now();
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: new Date(answeredAt).toUTCString() })).status).toBe(204);
    expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body.status).toBe('connected');
    // 95 s of talk; then the far end hangs up, and Twilio's completed is lost (answered 503 in a store blip, say)
    await h.clock.advanceSeconds(100);
    const endedAt = answeredAt + 95_000;
    await heartbeat(api, agent.engineToken); // the window's device let go of the call
    standIn.requests.length = 0;
    standIn.answer((request) => ({
      status: 200,
      body: { sid: 'CAchild2', parent_call_sid: 'CAparent2', account_sid: request.user, status: 'completed', end_time: new Date(endedAt).toUTCString(), duration: '95' },
    }));
    await h.services.reaper.tick();
    expect(standIn.requests).toEqual([]); // the callback may still come: read 30 s after the window let go
    await h.clock.advanceSeconds(30);
    await heartbeat(api, agent.engineToken);
    await h.services.reaper.tick();
    expect(standIn.requests.map((request) => `${request.method} ${request.path}`)).toEqual([`GET /2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAchild2.json`]);
    const ended = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(ended.body).toMatchObject({ request_id: id, status: 'completed', duration: 95 });
    standIn.answer(completedCall);
  });

  it("ends a call Twilio had ended before the agent's hang up (its completed lost) as Twilio recorded it: billed for its talk, not up to the hang up", async () => {
    const { t, agent, id } = await dialedCall('CAparent6');
    const leg = { CallSid: 'CAchild6', ParentCallSid: 'CAparent6', AccountSid: ACCOUNT_SID };
    await h.clock.advance(1000 - (h.clock.now() % 1000));
    const answeredAt = h.clock.now();
    expect((await signedStatus(t, id, { ...leg, CallStatus: 'in-progress', Timestamp: new Date(answeredAt).toUTCString() })).status).toBe(204);
    // 40 s of talk, then the far end hangs up and Twilio's completed is lost; 25 s later the agent, still shown the call, hangs up
    const endedAt = answeredAt + 40_000;
    await h.clock.advanceSeconds(65);
    standIn.requests.length = 0;
    standIn.answer((request) =>
      request.method === 'POST'
        ? twilioError(400, 21220, 'Call is not in-progress. Cannot redirect.')
        : { status: 200, body: { sid: 'CAchild6', parent_call_sid: 'CAparent6', account_sid: request.user, status: 'completed', end_time: new Date(endedAt).toUTCString(), duration: '40' } },
    );
    const hangup = await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-ended-already' });
    expect(hangup.status, JSON.stringify(hangup.body)).toBe(200);
    expect(standIn.requests.map((request) => `${request.method} ${request.path}`)).toEqual([
      `POST /2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAparent6.json`,
      `GET /2010-04-01/Accounts/${ACCOUNT_SID}/Calls/CAchild6.json`,
    ]);
    const ended = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(ended.body).toMatchObject({ request_id: id, status: 'completed', duration: 40 });
    const [row] = await h.services.db.query<{ ended_at: string | number; end_reason: string }>('SELECT ended_at, end_reason FROM call_intents WHERE id = $1', [id]);
    expect({ endedAt: Number(row!.ended_at), reason: row!.end_reason }).toEqual({ endedAt, reason: 'far_end' });

    // Twilio's record out of reach: the call is ended at the hang up all the same (the agent asked, and waits)
    const second = await dialedCall('CAparent7');
    expect((await signedStatus(second.t, second.id, { CallSid: 'CAchild7', ParentCallSid: 'CAparent7', AccountSid: ACCOUNT_SID, CallStatus: 'in-progress' })).status).toBe(204);
    standIn.answer((request) => (request.method === 'POST' ? twilioError(400, 21220, 'Call is not in-progress. Cannot redirect.') : twilioError(503, 20503, 'Service Unavailable')));
    await h.clock.advanceSeconds(20);
    const hungUpAt = h.clock.now();
    expect((await command(api, second.agent.widgetToken, { kind: 'hangup', request_id: 'hangup-ended-already-2' })).status).toBe(200);
    expect((await api.get(`/calls/${second.id}`, { auth: second.t.serverKey })).body).toMatchObject({ status: 'completed' });
    const [fallback] = await h.services.db.query<{ ended_at: string | number; end_reason: string }>('SELECT ended_at, end_reason FROM call_intents WHERE id = $1', [second.id]);
    expect({ endedAt: Number(fallback!.ended_at), reason: fallback!.end_reason }).toEqual({ endedAt: hungUpAt, reason: 'hangup' });
    standIn.answer(completedCall);
  });

  it("settles a call none of whose dialed leg's callbacks came from the leg Twilio lists under the window's leg: bound, ended and billed as Twilio recorded it", async () => {
    const { t, agent, id } = await dialedCall('CAparent3');
    // no status callback arrives: the leg is never named; 70 s of talk, then the window lets go
    await h.clock.advanceSeconds(LIMITS.orphanGraceSeconds + 80);
    const endedAt = Math.floor(h.clock.now() / 1000) * 1000 - 5_000;
    await heartbeat(api, agent.engineToken);
    expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body.status).toBe('dialing');
    standIn.requests.length = 0;
    standIn.answer((request) =>
      callList([{ sid: 'CAchild3', parent_call_sid: 'CAparent3', account_sid: request.user, status: 'completed', date_created: new Date(endedAt - 80_000).toUTCString(), end_time: new Date(endedAt).toUTCString(), duration: '70' }]),
    );
    await h.clock.advanceSeconds(PROVIDER_FINAL_CALLBACK_GRACE_SECONDS);
    await heartbeat(api, agent.engineToken);
    await h.services.reaper.tick();
    expect(standIn.requests.map((request) => `${request.method} ${request.path}`)).toEqual([`GET /2010-04-01/Accounts/${ACCOUNT_SID}/Calls.json?ParentCallSid=CAparent3&PageSize=20`]);
    const ended = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(ended.body).toMatchObject({ request_id: id, status: 'completed', duration: 70, ended_at: endedAt / 1000 });
    const [row] = await h.services.db.query<{ provider_leg_sid: string; charge_micros: string; per_minute_micros: string }>('SELECT provider_leg_sid, charge_micros, per_minute_micros FROM call_intents WHERE id = $1', [id]);
    expect(row!.provider_leg_sid).toBe('CAchild3');
    expect(Number(row!.charge_micros)).toBe(Math.ceil((70 * Number(row!.per_minute_micros)) / 60));
    standIn.answer(completedCall);
  });

  it("binds no leg, and ends nothing, from a listed leg whose parent is not the call's window leg", async () => {
    const { t, agent, id } = await dialedCall('CAparent5');
    await h.clock.advanceSeconds(LIMITS.orphanGraceSeconds + 1);
    await heartbeat(api, agent.engineToken); // the window let go of it
    standIn.requests.length = 0;
    standIn.answer((request) => callList([{ sid: 'CAstranger', parent_call_sid: 'CAother', account_sid: request.user, status: 'completed', end_time: new Date(h.clock.now()).toUTCString(), duration: '70' }]));
    await h.clock.advanceSeconds(PROVIDER_FINAL_CALLBACK_GRACE_SECONDS);
    await heartbeat(api, agent.engineToken);
    await h.services.reaper.tick();
    expect(standIn.requests.map((request) => request.method)).toEqual(['GET']);
    const [row] = await h.services.db.query<{ status: string; provider_leg_sid: string | null }>('SELECT status, provider_leg_sid FROM call_intents WHERE id = $1', [id]);
    expect(row).toEqual({ status: 'dialing', provider_leg_sid: null });
    standIn.answer(completedCall);
  });

  const OTHER_SID = `AC${'99887766554433221100ffeeddccbbaa'}`;
  /**
   * Five calls of one account, then one of another (the reaper takes them in that order, four at a
   * time), each dialed on a real window of its own and its leg bound: connected.
   */
  async function sixCalls(round: string) {
    const refused = await twilioTenant();
    const other = await seedTenant(h.services);
    await setAccountProvider(h.services, other.accountId, { accountSid: OTHER_SID, authToken: AUTH_TOKEN, apiKey: { sid: KEY_SID, secret: KEY_SECRET }, twimlAppSid: APP_SID });
    const calls: Array<{ id: string; leg: string; accountSid: string }> = [];
    const place = async (t: Tenant, email: string, accountSid: string) => {
      const agent = await readyAgent(api, t, email, false);
      await h.clock.advance(10); // the reaper takes calls oldest first
      const id = await requestAndClaim(api, t, agent, { agent: { type: 'email', value: email } });
      const n = calls.length;
      expect((await signedVoice(t, { CallSid: `CA${round}parent${n}`, From: `client:${engineIdentity(agent.engineId)}`, To: id, Biz: t.accountId, CallerId: CALLER_ID, AccountSid: accountSid })).status).toBe(200);
      const leg = `CA${round}leg${n}`;
      expect((await signedStatus(t, id, { CallSid: leg, ParentCallSid: `CA${round}parent${n}`, AccountSid: accountSid, CallStatus: 'in-progress' })).status).toBe(204);
      calls.push({ id, leg, accountSid });
      return agent;
    };
    const agents = [];
    for (let i = 0; i < 5; i += 1) {
      const { email } = await createMember(h.services, { accountId: refused.accountId, email: `agent${i}@acme.example`, name: `Agent ${i}`, departmentId: refused.salesId });
      agents.push(await place(refused, email, ACCOUNT_SID));
    }
    agents.push(await place(other, other.agent.email, OTHER_SID));
    return { calls, agents };
  }
  const statusOf = async (id: string) => (await h.services.db.query<{ status: string }>('SELECT status FROM call_intents WHERE id = $1', [id]))[0]!.status;
  const requestsOf = (method: 'GET' | 'POST', accountSid: string) => standIn.requests.filter((request) => request.method === method && request.user === accountSid).length;

  it("holds back the record reads of an account Twilio refuses, not another account's; Twilio failing holds back every read of the tick", async () => {
    /** The six calls, let go of by their windows 30 s ago: their completed lost. */
    async function unheldCalls(round: string) {
      const { calls, agents } = await sixCalls(round);
      // every window lets go of its call (once it has had time to take it up), 30 s ago
      await h.clock.advanceSeconds(LIMITS.orphanGraceSeconds + 1);
      for (const agent of agents) await heartbeat(api, agent.engineToken);
      await h.clock.advanceSeconds(PROVIDER_FINAL_CALLBACK_GRACE_SECONDS);
      for (const agent of agents) await heartbeat(api, agent.engineToken);
      return calls;
    }
    const ended = (request: TwilioRequest): TwilioAnswer => ({
      status: 200,
      body: { sid: request.path.match(/Calls\/([^/.]+)\.json$/)![1], account_sid: request.user, status: 'completed', end_time: new Date(h.clock.now() - 20_000).toUTCString(), duration: '40' },
    });
    const readsOf = (accountSid: string) => requestsOf('GET', accountSid);

    // Twilio refuses the first account's credentials (a 4xx: that account alone)
    let calls = await unheldCalls('r');
    standIn.requests.length = 0;
    standIn.answer((request) => (request.user === ACCOUNT_SID ? twilioError(401, 20003, 'Authenticate') : ended(request)));
    await h.services.reaper.tick();
    // the four lanes' first reads were refused; the fifth call of that account was not asked for
    expect(readsOf(ACCOUNT_SID)).toBe(4);
    expect(await Promise.all(calls.slice(0, 5).map((call) => statusOf(call.id)))).toEqual(Array(5).fill('connected'));
    // the other account's call was read and settled in the same tick
    expect(readsOf(OTHER_SID)).toBe(1);
    expect(await statusOf(calls[5]!.id)).toBe('completed');
    // a minute on, the refused account's calls are read again, and settled
    standIn.answer(ended);
    await h.clock.advanceSeconds(PROVIDER_RECHECK_SECONDS);
    await h.services.reaper.tick();
    expect(await Promise.all(calls.slice(0, 5).map((call) => statusOf(call.id)))).toEqual(Array(5).fill('completed'));

    // Twilio failing (a 5xx): no more reads in the tick, whichever the account
    calls = await unheldCalls('f');
    standIn.requests.length = 0;
    standIn.answer((request) => (request.user === ACCOUNT_SID ? twilioError(503, 20503, 'Service Unavailable') : ended(request)));
    await h.services.reaper.tick();
    expect(readsOf(ACCOUNT_SID)).toBe(4);
    expect(readsOf(OTHER_SID)).toBe(0);
    expect(await statusOf(calls[5]!.id)).toBe('connected');
    standIn.answer(ended);
    await h.clock.advanceSeconds(PROVIDER_RECHECK_SECONDS);
    await h.services.reaper.tick();
    expect(await Promise.all(calls.map((call) => statusOf(call.id)))).toEqual(Array(6).fill('completed'));

    // The refused account's calls fill the tick's places (five here): the place its skipped call
    // took goes to the other account's call, in a second pass
    const fivePlaces = createReaper({ ...h.services, providerCallsPerTick: 5 });
    calls = await unheldCalls('p');
    standIn.requests.length = 0;
    standIn.answer((request) => (request.user === ACCOUNT_SID ? twilioError(401, 20003, 'Authenticate') : ended(request)));
    await fivePlaces.tick();
    expect(readsOf(ACCOUNT_SID)).toBe(4);
    expect(readsOf(OTHER_SID)).toBe(1);
    expect(await statusOf(calls[5]!.id)).toBe('completed');
    // and the refused account's, once Twilio takes its credentials again
    standIn.answer(ended);
    await h.clock.advanceSeconds(PROVIDER_RECHECK_SECONDS);
    await fivePlaces.tick();
    expect(await Promise.all(calls.map((call) => statusOf(call.id)))).toEqual(Array(6).fill('completed'));
    standIn.answer(completedCall);
  });

  it("gives the places of an account's overdue calls, their reads refused, to another account's overdue calls in a second pass, and ends those past patience without a read", async () => {
    const fivePlaces = createReaper({ ...h.services, providerCallsPerTick: 5 });
    const { calls, agents } = await sixCalls('o');
    // every call's time limit a minute (the wallet's share can make it so), its windows holding it throughout, its callbacks lost
    await h.services.db.query('UPDATE call_intents SET time_limit_seconds = 60 WHERE id = ANY($1::text[])', [calls.map((call) => call.id)]);
    const holdOn = async () => {
      for (const [i, agent] of agents.entries()) await heartbeat(api, agent.engineToken, { call_id: calls[i]!.id, busy: true });
    };
    await h.clock.advanceSeconds(60 + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS + 1);
    await holdOn();
    standIn.requests.length = 0;
    standIn.answer((request) =>
      request.user === ACCOUNT_SID
        ? twilioError(401, 20003, 'Authenticate')
        : request.method === 'GET'
          ? { status: 200, body: { sid: request.path.match(/Calls\/([^/.]+)\.json$/)![1], account_sid: request.user, status: 'completed', end_time: new Date(h.clock.now() - 20_000).toUTCString(), duration: '40' } }
          : completedCall(request),
    );
    await fivePlaces.tick();
    expect(requestsOf('GET', ACCOUNT_SID)).toBe(PROVIDER_REQUESTS_AT_ONCE);
    // the other account's call, which the refused account's five had crowded out of the tick, is read and settled
    expect(requestsOf('GET', OTHER_SID)).toBe(1);
    expect(await statusOf(calls[5]!.id)).toBe('completed');
    expect(await Promise.all(calls.slice(0, 5).map((call) => statusOf(call.id)))).toEqual(Array(5).fill('connected'));
    // Twilio refusing that account on: past their patience, its calls end at their limit without a read
    for (let s = 0; s < PROVIDER_RECORD_PATIENCE_SECONDS; s += 60) {
      await h.clock.advanceSeconds(60);
      await holdOn();
      await fivePlaces.tick();
    }
    await h.clock.advanceSeconds(1);
    await fivePlaces.tick();
    expect(await Promise.all(calls.slice(0, 5).map((call) => statusOf(call.id)))).toEqual(Array(5).fill('completed'));
    standIn.answer(completedCall);
  });

  it("stops asking Twilio to end the calls of silent windows once it failed in the tick (that account's alone, where Twilio refused it): the tick's other rules are not held up", async () => {
    // Twilio failing (a 5xx): after the first four hangups, none more in the tick, whichever the account
    let { calls } = await sixCalls('a');
    await h.clock.advanceSeconds(LIMITS.engineOfflineAfterSeconds + 1); // every window silent
    standIn.requests.length = 0;
    standIn.answer(() => twilioError(503, 20503, 'Service Unavailable'));
    await h.services.reaper.tick();
    expect(requestsOf('POST', ACCOUNT_SID)).toBe(PROVIDER_REQUESTS_AT_ONCE);
    expect(requestsOf('POST', OTHER_SID)).toBe(0);
    expect(await Promise.all(calls.map((call) => statusOf(call.id)))).toEqual(Array(6).fill('connected'));
    // Twilio back: the next ticks end them all
    standIn.answer(completedCall);
    await h.clock.advanceSeconds(ABANDONED_HANGUP_RETRY.firstMs / 1000);
    await h.services.reaper.tick();
    expect(await Promise.all(calls.map((call) => statusOf(call.id)))).toEqual(Array(6).fill('completed'));

    // Twilio refusing the first account (a 4xx): the other account's call is ended in the same tick
    ({ calls } = await sixCalls('b'));
    await h.clock.advanceSeconds(LIMITS.engineOfflineAfterSeconds + 1);
    standIn.requests.length = 0;
    standIn.answer((request) => (request.user === ACCOUNT_SID ? twilioError(401, 20003, 'Authenticate') : completedCall(request)));
    await h.services.reaper.tick();
    expect(requestsOf('POST', ACCOUNT_SID)).toBe(PROVIDER_REQUESTS_AT_ONCE);
    expect(requestsOf('POST', OTHER_SID)).toBe(1);
    expect(await statusOf(calls[5]!.id)).toBe('completed');
    standIn.answer(completedCall);
    await h.clock.advanceSeconds(ABANDONED_HANGUP_RETRY.firstMs / 1000);
    await h.services.reaper.tick();
    expect(await Promise.all(calls.map((call) => statusOf(call.id)))).toEqual(Array(6).fill('completed'));

    // The refused account's calls fill the tick's places (five here): the place its skipped call
    // took goes to the other account's call, in a second pass
    const fivePlaces = createReaper({ ...h.services, providerCallsPerTick: 5 }); // (it judges silence once it has run for the store's grace)
    ({ calls } = await sixCalls('c'));
    await h.clock.advanceSeconds(Math.max(LIMITS.engineOfflineAfterSeconds, LIMITS.storeRecoveryGraceSeconds) + 1);
    standIn.requests.length = 0;
    standIn.answer((request) => (request.user === ACCOUNT_SID ? twilioError(401, 20003, 'Authenticate') : completedCall(request)));
    await fivePlaces.tick();
    expect(requestsOf('POST', ACCOUNT_SID)).toBe(PROVIDER_REQUESTS_AT_ONCE);
    expect(requestsOf('POST', OTHER_SID)).toBe(1);
    expect(await statusOf(calls[5]!.id)).toBe('completed');
    standIn.answer(completedCall);
  });

  it('answers 503 provider_unavailable for the token of a window whose account lacks the API key or TwiML App, and logs what to set', async () => {
    const lines: string[] = [];
    const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => done(void lines.push(chunk.toString())) });
    const logged = await buildApp(h.services, { logger: { level: 'warn', stream } });
    await logged.ready();
    const loggedApi = client(logged);
    try {
      for (const credentials of [{}, { apiKey: { sid: KEY_SID, secret: KEY_SECRET } }, { twimlAppSid: APP_SID }]) {
        const t = await twilioTenant(credentials);
        const ticket = await launchTicket(loggedApi, await openSession(loggedApi, t));
        const paired = await loggedApi.post('/engine/pair', { ticket, simulated: false });
        expect(paired.body.voice_provider).toBe('twilio');
        await expectError(loggedApi.post('/engine/voice-token', undefined, { auth: paired.body.engine_token }), 503, 'provider_unavailable');
        expect(lines.join('')).toContain(`account ${t.accountId} has no Twilio API key or TwiML App: set them with c2c account set-provider`);
      }
    } finally {
      await logged.close();
    }
    expect(lines.join('')).not.toContain(KEY_SECRET);
  });

  it("rings a simulated incoming call on simulated windows only: a Twilio window's Device would never hear it", async () => {
    const t = await twilioTenant();
    await readyAgent(api, t, t.agent.email, false);
    const inbound = () => api.post('/simulated/inbound-calls', { integration_id: t.integrationId, from: US_NUMBER }, { auth: t.serverKey });
    await expectError(inbound(), 409, 'agent_offline');
    const simulated = await readyAgent(api, t, t.agent.email, true);
    const rung = await inbound();
    expect(rung.status, JSON.stringify(rung.body)).toBe(201);
    expect((await widgetState(api, simulated.widgetToken)).body.call).toMatchObject({ request_id: rung.body.request_id, status: 'incoming' });
  });
});
