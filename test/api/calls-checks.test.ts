/**
 * POST /calls refusals that need no engine (spec sections 4 and 7), in the documented order, and
 * GET /calls/{id} and hangup scoping. Engine-dependent codes are in calls-engine.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fundAccount } from '../../api/domain/operator/accounts.js';
import { setIntegrationEnabled, setMemberOverrides, setPolicy } from '../../api/domain/operator/integrations.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { BLOCKED_NUMBER, FR_NUMBER, seedTenant, US_NUMBER, UK_NUMBER, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('POST /calls checks on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const deps = () => ({ db: h.services.db, bus: h.services.bus, clock: h.services.clock });
  const valid = () => ({ integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: US_NUMBER });
  const call = (body: Record<string, unknown>, headers: Record<string, string> = {}) => api.post('/calls', body, { auth: t.serverKey, headers });

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('with every check passing and no call window, answers agent_offline (409)', async () => {
    await expectError(call(valid()), 409, 'agent_offline');
    await expectError(call({ ...valid(), phone_number: UK_NUMBER }), 409, 'agent_offline');
  });

  it('refuses by the integration first', async () => {
    await expectError(call({ ...valid(), integration_id: 'c2c_elsewhere', agent: { type: 'uuid', value: 'x' } }), 403, 'integration_mismatch');
    await setIntegrationEnabled(deps(), t.integrationId, false);
    await expectError(call({ ...valid(), phone_number: 'garbage' }), 403, 'integration_disabled');
    await setIntegrationEnabled(deps(), t.integrationId, true);
  });

  it('then by the agent', async () => {
    await expectError(call({ ...valid(), agent: { type: 'uuid', value: t.agent.uuid }, phone_number: 'garbage' }), 422, 'identifier_mode');
    await expectError(call({ ...valid(), agent: { type: 'email', value: 'ghost@acme.example' }, phone_number: 'garbage' }), 404, 'agent_unknown');
    await expectError(call({ ...valid(), agent: { type: 'email', value: t.outside.email }, phone_number: 'garbage' }), 403, 'agent_not_assigned');
    await expectError(call({ ...valid(), agent: { type: 'email', value: t.disabled.email }, phone_number: 'garbage' }), 403, 'agent_disabled');
    await setMemberOverrides(deps(), t.integrationId, t.agent.id, { outbound: false });
    await expectError(call({ ...valid(), phone_number: 'garbage' }), 403, 'outbound_not_allowed');
    await setMemberOverrides(deps(), t.integrationId, t.agent.id, { outbound: null as unknown as boolean });
  });

  it('then by the number', async () => {
    for (const bad of ['garbage', '12025550123', '+1 202 555 0123', '+1202555', '+99912345678']) {
      await expectError(call({ ...valid(), phone_number: bad }), 422, 'invalid_phone_number');
    }
    await expectError(call({ ...valid(), phone_number: 12025550123 }), 422, 'invalid_phone_number');
    await expectError(call({ ...valid(), phone_number: FR_NUMBER }), 403, 'destination_not_allowed');
    // premium-rate numbers of an allowed country (US 900, UK 09): toll fraud, refused whatever the
    // rates cover, until the operator allows them for the integration
    for (const premium of ['+19005550123', '+449098790000']) {
      const refused = await expectError(call({ ...valid(), phone_number: premium }), 403, 'destination_not_allowed');
      expect(refused.body.message).toBe('Premium-rate numbers are not allowed by the integration.');
    }
    await setPolicy(deps(), t.integrationId, { premiumRateAllowed: true });
    await expectError(call({ ...valid(), phone_number: '+19005550123' }), 409, 'agent_offline'); // every check passed
    await setPolicy(deps(), t.integrationId, { premiumRateAllowed: false });
    await expectError(call({ ...valid(), phone_number: BLOCKED_NUMBER }), 403, 'destination_blocked');
  });

  it('then by the account: caller ID and balance', async () => {
    await setPolicy(deps(), t.integrationId, { callerId: null });
    await expectError(call(valid()), 422, 'no_caller_id');
    await setPolicy(deps(), t.integrationId, { callerId: '+12025550100' });

    const [{ balance_micros }] = (await h.services.db.query<{ balance_micros: number }>('SELECT balance_micros FROM accounts WHERE id = $1', [t.accountId])) as [{ balance_micros: number }];
    // spent down to less than a minute at 0.01/min (calls' debits; no operator command takes money away)
    await h.services.db.query('UPDATE accounts SET balance_micros = 5000 WHERE id = $1', [t.accountId]);
    await expectError(call(valid()), 402, 'insufficient_balance');
    await fundAccount(deps(), t.accountId, balance_micros - 5000);
    await expectError(call(valid()), 409, 'agent_offline');
  });

  it('refuses oversize and malformed fields with 422 (a body over 64 KB 413), never 500', async () => {
    const long = 'x'.repeat(121);
    for (const field of ['contact_reference', 'display_name', 'display_company']) {
      const r = await expectError(call({ ...valid(), [field]: long }), 422, 'invalid_request');
      expect(r.body.message).toContain(field);
      await expectError(call({ ...valid(), [field]: 'x'.repeat(120) }), 409, 'agent_offline');
      // characters, not UTF-16 units: 120 emoji (240 units) are 120 characters
      await expectError(call({ ...valid(), [field]: '😀'.repeat(120) }), 409, 'agent_offline');
      await expectError(call({ ...valid(), [field]: '😀'.repeat(121) }), 422, 'invalid_request');
    }
    // {"blob":"…"} serializes to 11 bytes around its text: 2,001 bytes refused, 2,000 taken
    await expectError(call({ ...valid(), metadata: { blob: 'y'.repeat(1990) } }), 422, 'invalid_request');
    await expectError(call({ ...valid(), metadata: { blob: 'y'.repeat(1989) } }), 409, 'agent_offline');
    await expectError(call({ ...valid(), metadata: ['not', 'an', 'object'] }), 422, 'invalid_request');
    await expectError(call({ ...valid(), surprise: true }), 422, 'invalid_request');
    // an unknown field ranks after a named field's shape, and before the checks of their values (README, validation order)
    await expectError(call({ ...valid(), phone_number: 12025550123, surprise: true }), 422, 'invalid_phone_number');
    expect((await expectError(call({ ...valid(), phone_number: 'bad', surprise: true }), 422, 'invalid_request')).body.message).toContain('surprise');
    await expectError(call(valid(), { 'idempotency-key': 'k'.repeat(121) }), 422, 'invalid_request');
    await expectError(call(valid(), { 'idempotency-key': 'k'.repeat(120) }), 409, 'agent_offline');
    await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: '{"integration_id": ', headers: { 'content-type': 'application/json' } }), 422, 'invalid_request');
    await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: '[]', headers: { 'content-type': 'application/json' } }), 422, 'invalid_request');
    await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: 'x'.repeat(70_000), headers: { 'content-type': 'application/json' } }), 413, 'invalid_request');
  });

  it('GET /calls/{id} and hangup answer 404 for unknown ids', async () => {
    await expectError(api.get('/calls/ci_doesnotexist', { auth: t.serverKey }), 404, 'not_found');
    await expectError(api.post('/calls/ci_doesnotexist/hangup', undefined, { auth: t.serverKey }), 404, 'not_found');
  });
});
