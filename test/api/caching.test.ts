/**
 * What browsers and proxies may keep of the API's answers (api/http/no-store.ts): nothing, unless
 * a route says otherwise. Sessions, tickets, engine and voice tokens, a call's details: a shared
 * cache or a browser's disk cache holding them past their use would hand them to whoever came next.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';
import { heartbeat, openSession, requestCall, widgetState } from '../helpers/flows.js';

describe('API answers and caches', () => {
  let h: Harness;
  let t: Tenant;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness('pglite');
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('lets nobody keep an answer carrying a credential or a call, nor a refusal', async () => {
    const session = await api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey });
    const widgetToken: string = session.body.widget_token;
    const ticket = await api.post('/widget/launch-ticket', undefined, { auth: widgetToken, origin: ORIGIN });
    const paired = await api.post('/engine/pair', { ticket: ticket.body.ticket, simulated: true });
    const voice = await api.post('/engine/voice-token', undefined, { auth: paired.body.engine_token });
    expect((await heartbeat(api, paired.body.engine_token)).status).toBe(200);
    const refreshed = await api.post('/widget/refresh', undefined, { auth: await openSession(api, t), origin: ORIGIN });
    const call = await requestCall(api, t);
    const read = await api.get(`/calls/${call.body.request_id}`, { auth: t.serverKey });
    const refused = await api.get('/calls/ci_unknown', { auth: t.serverKey });
    for (const answer of [session, ticket, paired, voice, refreshed, read, refused]) expect(answer.headers['cache-control']).toBe('no-store');
    expect([session.status, ticket.status, paired.status, voice.status, refreshed.status, read.status, refused.status]).toEqual([201, 200, 201, 200, 200, 200, 404]);
  });

  it("keeps the widget state's own rule: kept, but revalidated with its ETag", async () => {
    const token = await openSession(api, t);
    const state = await widgetState(api, token);
    expect(state.status).toBe(200);
    expect(state.headers['cache-control']).toBe('no-cache');
    // revalidated: unchanged, the ETag answers 304 with no body
    const again = await api.get('/widget/state', { auth: token, origin: ORIGIN, headers: { 'if-none-match': String(state.headers.etag) } });
    expect(again.status).toBe(304);
  });
});
