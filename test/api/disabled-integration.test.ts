/**
 * An integration an operator disabled (README, decisions: "a disabled integration's server key"):
 * nothing new starts under it, its widgets and windows are refused, but its server key can still
 * read the calls that were up and end them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountStatus } from '../../api/domain/operator/accounts.js';
import { setIntegrationEnabled } from '../../api/domain/operator/integrations.js';
import { engineIdentity } from '../../shared/prefixes.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { heartbeat, READY, readyAgent, requestCall, widgetState } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { providerWebhooks, realAgent, requestAndClaim } from '../helpers/provider.js';
import { CALLER_ID, ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('a disabled integration on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());
  const { signedVoice } = providerWebhooks(() => h, () => api);

  it("tells every node of an account's suspension whenever it is stored: a store failing after the change leaves none unannounced", async () => {
    const tenant = await seedTenant(h.services);
    const agent = await readyAgent(api, tenant);
    const announced: string[] = [];
    const stop = h.services.bus.subscribe((message) => void (message.type === 'integration' && announced.push(message.integrationId)));
    // the store answers the change, then stops answering (a statement timeout, a dropped connection)
    let statements = 0;
    const real = h.services.db;
    const firstOnly = (sql: Pick<typeof real, 'query'>) => ({
      query: (...args: Parameters<typeof real.query>) => (statements++ === 0 ? sql.query(...args) : Promise.reject(new Error('store gone'))),
    });
    // (in a transaction or not, whichever the change uses)
    const db = { ...firstOnly(real), tx: ((fn, options) => real.tx((sql) => fn(firstOnly(sql) as typeof sql), options)) as typeof real.tx };
    let outcome: 'done' | 'failed';
    try {
      outcome = await setAccountStatus({ db: db as typeof real, bus: h.services.bus, clock: h.services.clock }, tenant.accountId, 'suspended').then(
        () => 'done' as const,
        () => 'failed' as const,
      );
    } finally {
      stop();
    }
    const [account] = await real.query<{ status: string }>('SELECT status FROM accounts WHERE id = $1', [tenant.accountId]);
    // stored and announced (and said so), or neither (and the operator told it failed): never stored unannounced
    const stored = account!.status === 'suspended';
    expect({ stored, announced, outcome }).toEqual(stored ? { stored, announced: [tenant.integrationId], outcome: 'done' } : { stored, announced: [], outcome: 'failed' });
    if (stored) await expectError(widgetState(api, agent.widgetToken), 403, 'integration_disabled');
    await expect(setAccountStatus({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, 'acc_none', 'active')).rejects.toThrow('No account acc_none.');
  });

  it('refuses new sessions, calls, widgets and windows, and lets its server key read and end the calls that were up', async () => {
    const agent = await readyAgent(api, t);
    const queued = await requestCall(api, t);
    expect(queued.status).toBe(202);
    const callId = queued.body.call_id as string;

    await setIntegrationEnabled({ db: h.services.db, bus: h.services.bus, clock: h.services.clock }, t.integrationId, false);

    await expectError(requestCall(api, t), 403, 'integration_disabled');
    await expectError(api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey }), 403, 'integration_disabled');
    await expectError(widgetState(api, agent.widgetToken), 403, 'integration_disabled');
    await expectError(heartbeat(api, agent.engineToken, READY), 403, 'integration_disabled');

    const read = await api.get(`/calls/${callId}`, { auth: t.serverKey });
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ ok: true, call_id: callId, status: 'queued' });
    const ended = await api.post(`/calls/${callId}/hangup`, undefined, { auth: t.serverKey });
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect((await api.get(`/calls/${callId}`, { auth: t.serverKey })).body).toMatchObject({ status: 'canceled', ended_at: expect.any(Number) });
  });

  it('does not dial a call claimed before the integration was disabled, nor one whose account was suspended since', async () => {
    for (const stop of ['integration', 'account'] as const) {
      const tenant = await seedTenant(h.services);
      const agent = await realAgent(api, tenant);
      const id = await requestAndClaim(api, tenant, agent);
      const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
      if (stop === 'integration') await setIntegrationEnabled(deps, tenant.integrationId, false);
      else await setAccountStatus(deps, tenant.accountId, 'suspended');
      // The window had already connected: the provider asks for dial instructions.
      const voice = await signedVoice(tenant, { CallSid: `CA-disabled-${stop}`, From: `client:${engineIdentity(agent.engineId)}`, To: id, Biz: tenant.accountId, CallerId: CALLER_ID });
      expect(voice.status).toBe(200);
      expect(voice.body, stop).toContain('<Reject');
      const call = await api.get(`/calls/${id}`, { auth: tenant.serverKey });
      expect(call.body, stop).toMatchObject({ status: 'failed', error: 'integration_disabled' });
    }
  });
});
