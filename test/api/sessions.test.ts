/** POST /sessions (spec section 4) and every session code of section 7, on each store driver. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMember, updateMember } from '../../api/domain/operator/accounts.js';
import {
  mapIntegratorUuid,
  setAllowAllOrigins,
  setCoverage,
  setIdentifierMode,
  setIntegrationEnabled,
  setMemberOverrides,
} from '../../api/domain/operator/integrations.js';
import { storeDrivers } from '../helpers/env.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';
import { expectError } from '../helpers/expect.js';

describe.each(storeDrivers())('POST /sessions on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const deps = () => ({ db: h.services.db, bus: h.services.bus, clock: h.services.clock });
  const session = (body: Record<string, unknown>, auth = t.serverKey) => api.post('/sessions', body, { auth });
  const valid = () => ({ integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN });

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('answers 201 with a Session for a covered, enabled agent on an allowed origin', async () => {
    const res = await session(valid());
    expect(res.status).toBe(201);
    expect(res.body.ok).toBe(true);
    expect(res.body.widget_token).toMatch(/^c2cw_[0-9A-Za-z]{48}$/);
    expect(res.body.expires_at).toBe(Math.floor(h.clock.now() / 1000) + 30 * 60);
    expect(res.body.agent).toEqual({ name: 'Ana Agent', identifier: t.agent.email, type: 'email', department: 'Sales' });
    expect(res.body.policy).toMatchObject({ outbound: true, inbound: true, number_visibility: 'show', controls: ['mute', 'dtmf'], max_call_seconds: 3600 });
    expect(res.body.engine).toBeNull();
  });

  it('matches the e-mail case-insensitively and never creates a member', async () => {
    const res = await session({ ...valid(), agent: { type: 'email', value: 'ANA@Acme.Example' } });
    expect(res.status).toBe(201);
    await expectError(session({ ...valid(), agent: { type: 'email', value: 'nobody@acme.example' } }), 404, 'agent_unknown');
    const [count] = await h.services.db.query<{ n: number }>("SELECT count(*)::int AS n FROM members WHERE email = 'nobody@acme.example'");
    expect(count!.n).toBe(0);
  });

  it('refuses origins not in the allowed list, and anything that is not a bare origin', async () => {
    await expectError(session({ ...valid(), origin: 'https://evil.example' }), 403, 'origin_not_allowed');
    await expectError(session({ ...valid(), origin: 'https://crm.example.com:8443' }), 403, 'origin_not_allowed');
    await expectError(session({ ...valid(), origin: 'https://crm.example.com/contacts' }), 422, 'invalid_request');
    await expectError(session({ ...valid(), origin: 'https://crm.example.com/' }), 422, 'invalid_request');
    await expectError(session({ ...valid(), origin: 'crm.example.com' }), 422, 'invalid_request');
    // what the URL parser would read as https://crm.example.com, but is not written as an origin
    await expectError(session({ ...valid(), origin: 'https:crm.example.com' }), 422, 'invalid_request');
    await expectError(session({ ...valid(), origin: 'https:/crm.example.com' }), 422, 'invalid_request');
  });

  it('with allow-all on, accepts any origin and binds the session to it', async () => {
    await setAllowAllOrigins(deps(), t.integrationId, true);
    const res = await session({ ...valid(), origin: 'https://anywhere.example' });
    expect(res.status).toBe(201);
    const state = await api.get('/widget/state', { auth: res.body.widget_token, origin: 'https://anywhere.example' });
    expect(state.status).toBe(200);
    await expectError(api.get('/widget/state', { auth: res.body.widget_token, origin: ORIGIN }), 403, 'origin_not_allowed');
    await setAllowAllOrigins(deps(), t.integrationId, false);
    await expectError(session({ ...valid(), origin: 'https://anywhere.example' }), 403, 'origin_not_allowed');
  });

  it('refuses a disabled member and a member outside coverage', async () => {
    await expectError(session({ ...valid(), agent: { type: 'email', value: t.disabled.email } }), 403, 'agent_disabled');
    await expectError(session({ ...valid(), agent: { type: 'email', value: t.outside.email } }), 403, 'agent_not_assigned');
  });

  it('applies a per-member override that disables calls', async () => {
    await setMemberOverrides(deps(), t.integrationId, t.agent.id, { calls_enabled: false });
    await expectError(session(valid()), 403, 'agent_disabled');
    await setMemberOverrides(deps(), t.integrationId, t.agent.id, { calls_enabled: true });
    expect((await session(valid())).status).toBe(201);
  });

  it('refuses a missing, malformed or wrong-mode agent with identifier_mode', async () => {
    const { agent: _agent, ...noAgent } = valid();
    await expectError(session(noAgent), 422, 'identifier_mode');
    await expectError(session({ ...valid(), agent: { type: 'phone', value: 'x' } }), 422, 'identifier_mode');
    await expectError(session({ ...valid(), agent: 'ana@acme.example' }), 422, 'identifier_mode');
    await expectError(session({ ...valid(), agent: { type: 'uuid', value: t.agent.uuid } }), 422, 'identifier_mode');
  });

  it('refuses a body for another integration, unknown fields and non-JSON', async () => {
    await expectError(session({ ...valid(), integration_id: 'c2c_other' }), 403, 'integration_mismatch');
    await expectError(session({ ...valid(), extra: 1 }), 422, 'invalid_request');
    await expectError(api.post('/sessions', undefined, { auth: t.serverKey, raw: 'not json', headers: { 'content-type': 'application/json' } }), 422, 'invalid_request');
    await expectError(api.post('/sessions', undefined, { auth: t.serverKey, raw: 'a=b', headers: { 'content-type': 'text/plain' } }), 422, 'invalid_request');
    await expectError(api.post('/sessions', undefined, { auth: t.serverKey }), 422, 'invalid_request');
  });

  it('refuses without a valid server key', async () => {
    await expectError(session(valid(), 'c2ck_' + 'a'.repeat(48)), 401, 'unauthorized');
    await expectError(api.post('/sessions', valid()), 401, 'unauthorized');
    await expectError(session(valid(), 'not-a-key'), 401, 'unauthorized');
  });

  it('in uuid mode, selects by stable UUID or by the mapped integrator UUID, and reports ambiguity', async () => {
    await setIdentifierMode(deps(), t.integrationId, 'uuid');
    await expectError(session(valid()), 422, 'identifier_mode');
    const byStable = await session({ ...valid(), agent: { type: 'uuid', value: t.agent.uuid.toUpperCase() } });
    expect(byStable.status).toBe(201);
    expect(byStable.body.agent.identifier).toBe(t.agent.uuid);

    await mapIntegratorUuid(deps(), t.integrationId, t.agent.id, 'crm-user-17');
    const byMapped = await session({ ...valid(), agent: { type: 'uuid', value: 'crm-user-17' } });
    expect(byMapped.status).toBe(201);
    expect(byMapped.body.agent.identifier).toBe('crm-user-17');

    // Another member mapped to the first member's stable UUID: one value, two members. The operator
    // steps refuse it; a row written otherwise (by hand, or by a release that did not check) is ambiguous.
    const other = await createMember(deps(), { accountId: t.accountId, email: 'zed@acme.example', name: 'Zed', departmentId: t.salesId });
    await expect(mapIntegratorUuid(deps(), t.integrationId, other.id, t.agent.uuid)).rejects.toThrow(`already member ${t.agent.id}'s`);
    await h.services.db.query('INSERT INTO integration_members (integration_id, member_id, integrator_uuid) VALUES ($1, $2, $3)', [t.integrationId, other.id, t.agent.uuid]);
    await expectError(session({ ...valid(), agent: { type: 'uuid', value: t.agent.uuid } }), 409, 'agent_ambiguous');
    await mapIntegratorUuid(deps(), t.integrationId, other.id, null);
    await setIdentifierMode(deps(), t.integrationId, 'email');
  });

  it('follows coverage: selected members, departments, and whether future members inherit', async () => {
    await setCoverage(deps(), t.integrationId, { mode: 'members', inheritFuture: false, memberIds: [t.outside.id] });
    expect((await session({ ...valid(), agent: { type: 'email', value: t.outside.email } })).status).toBe(201);
    await expectError(session(valid()), 403, 'agent_not_assigned');

    await setCoverage(deps(), t.integrationId, { mode: 'everyone', inheritFuture: false });
    expect((await session(valid())).status).toBe(201);
    await h.clock.advance(1000);
    const newcomer = await createMember(deps(), { accountId: t.accountId, email: 'new@acme.example', name: 'New' });
    await expectError(session({ ...valid(), agent: { type: 'email', value: newcomer.email } }), 403, 'agent_not_assigned');
    await setCoverage(deps(), t.integrationId, { mode: 'everyone', inheritFuture: true });
    expect((await session({ ...valid(), agent: { type: 'email', value: newcomer.email } })).status).toBe(201);

    await setCoverage(deps(), t.integrationId, { mode: 'departments', inheritFuture: true, departmentIds: [t.salesId] });
    await expectError(session({ ...valid(), agent: { type: 'email', value: t.outside.email } }), 403, 'agent_not_assigned');
  });

  it("lets an integration name only its own account's members and departments, changing nothing otherwise", async () => {
    const mine = await seedTenant(h.services);
    const theirs = await seedTenant(h.services);
    await expect(mapIntegratorUuid(deps(), mine.integrationId, theirs.agent.id, '7d0e…-uuid')).rejects.toThrow(/Not members of integration/);
    await expect(setMemberOverrides(deps(), mine.integrationId, 'm_nobody', { outbound: false })).rejects.toThrow(/m_nobody/);
    await expect(
      setCoverage(deps(), mine.integrationId, { mode: 'departments', inheritFuture: true, departmentIds: [mine.salesId, theirs.supportId] }),
    ).rejects.toThrow(/Not departments of integration/);
    await expect(setCoverage(deps(), mine.integrationId, { mode: 'members', inheritFuture: false, memberIds: [theirs.agent.id] })).rejects.toThrow(/Not members/);
    // Members too belong to their own account's departments only.
    await expect(createMember(deps(), { accountId: mine.accountId, email: 'x@acme.example', name: 'X', departmentId: theirs.salesId })).rejects.toThrow(/No department/);
    await expect(updateMember(deps(), mine.agent.id, { departmentId: theirs.salesId })).rejects.toThrow(/No department/);
    const rows = await h.services.db.query('SELECT 1 FROM integration_members WHERE integration_id = $1', [mine.integrationId]);
    expect(rows).toHaveLength(0);
    // Coverage is as seeded (Sales): the refused changes were not half made.
    const sessionOf = (email: string) => session({ integration_id: mine.integrationId, agent: { type: 'email', value: email }, origin: ORIGIN }, mine.serverKey);
    expect((await sessionOf(mine.agent.email)).status).toBe(201);
    await expectError(sessionOf(mine.outside.email), 403, 'agent_not_assigned');
  });

  it('announces a coverage change only once it is committed, so a node that reads on hearing it reads the change', async () => {
    const heard: Array<Promise<unknown>> = [];
    const unsubscribe = h.services.bus.subscribe((message) => {
      if (message.type === 'integration' && message.integrationId === t.integrationId) {
        heard.push(h.services.db.query<{ coverage_mode: string }>('SELECT coverage_mode FROM integrations WHERE id = $1', [t.integrationId]).then(([row]) => row?.coverage_mode));
      }
    });
    try {
      await setCoverage(deps(), t.integrationId, { mode: 'departments', inheritFuture: true, departmentIds: [t.salesId] });
      await setCoverage(deps(), t.integrationId, { mode: 'everyone', inheritFuture: true });
    } finally {
      unsubscribe();
    }
    expect(await Promise.all(heard)).toEqual(['departments', 'everyone']);
  });

  it('refuses a disabled integration', async () => {
    await setIntegrationEnabled(deps(), t.integrationId, false);
    await expectError(session(valid()), 403, 'integration_disabled');
    await setIntegrationEnabled(deps(), t.integrationId, true);
    expect((await session(valid())).status).toBe(201);
  });
});
