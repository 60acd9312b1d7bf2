/**
 * Credentials and operator switches taking effect on the next request (spec sections 1 and 5):
 * server key rotation and revocation, integration revocation ending widget sessions, member
 * changes, the platform switch, and the widget token's origin and lifetime.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMember, updateMember } from '../../api/domain/operator/accounts.js';
import { revokeServerKey, rotateServerKey, setCoverage, setIntegrationEnabled } from '../../api/domain/operator/integrations.js';
import { issueServerKey } from '../../api/domain/server-keys.js';
import { ROTATED_KEY_REFRESH_GRACE_MS } from '../../api/domain/sessions.js';
import { revokeIntegration } from '../../api/domain/operator/revocation.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { heartbeat, launchTicket, readyAgent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('credentials on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const deps = () => ({ db: h.services.db, bus: h.services.bus, clock: h.services.clock });
  const sessionBody = () => ({ integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN });
  const newSession = async (key = t.serverKey) => {
    const res = await api.post('/sessions', sessionBody(), { auth: key });
    expect(res.status).toBe(201);
    return res.body.widget_token as string;
  };
  const state = (token: string, origin = ORIGIN) => api.get('/widget/state', { auth: token, origin });
  /** statements of this database waiting on a row lock (PostgreSQL) */
  const lockWaits = async () =>
    (await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))[0]!.n;

  beforeAll(async () => {
    h = await createHarness(driver, { widgetTokenTtlSeconds: 1800 });
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it("caches a token's secret hash in memory of its own, not as a view that keeps a buffer of the driver's alive", async () => {
    const token = await newSession();
    const { session } = await h.services.sessions.authenticate(token, ORIGIN);
    // pg hands bytea over as views into 8 KB slabs: a cached view would keep its slab
    expect(session.secret_hash.byteLength).toBe(32);
    expect(session.secret_hash.buffer.byteLength).toBe(32);
  });

  it('stores secrets only as SHA-256, never in clear, whatever the table or column', async () => {
    const own = await seedTenant(h.services);
    const agent = await readyAgent(api, own);
    const ticket = await launchTicket(api, agent.widgetToken);
    const tables = ['server_keys', 'widget_sessions', 'launch_tickets', 'engines'];
    const rows = Object.fromEntries(await Promise.all(tables.map(async (table) => [table, await h.services.db.query(`SELECT * FROM ${table}`)] as const)));
    const dump = JSON.stringify(rows);
    // a token is its prefix, a 16-character lookup id, and the secret
    for (const token of [t.serverKey, own.serverKey, agent.widgetToken, agent.engineToken, ticket]) expect(dump).not.toContain(token.slice(5 + 16));
    for (const table of tables) {
      expect(rows[table]!.length, table).toBeGreaterThan(0);
      for (const row of rows[table]! as Array<{ secret_hash: Uint8Array }>) expect(Buffer.from(row.secret_hash).length, table).toBe(32);
    }
  });

  it('rotation invalidates the old key on its next request and the new key works', async () => {
    const old = t.serverKey;
    const fresh = await rotateServerKey(deps(), t.integrationId);
    expect(fresh).toMatch(/^c2ck_/);
    await expectError(api.post('/sessions', sessionBody(), { auth: old }), 401, 'unauthorized');
    expect((await api.post('/sessions', sessionBody(), { auth: fresh })).status).toBe(201);
    t.serverKey = fresh;
  });

  it('revoking the key stops the backend', async () => {
    await revokeServerKey(deps(), t.integrationId);
    await expectError(api.post('/sessions', sessionBody(), { auth: t.serverKey }), 401, 'unauthorized');
    await expectError(api.get('/calls/ci_x', { auth: t.serverKey }), 401, 'unauthorized');
    t.serverKey = await rotateServerKey(deps(), t.integrationId);
  });

  it('a widget session made with a key rotated or revoked since is refreshed for ROTATED_KEY_REFRESH_GRACE_MS more, then not: the widget asks its backend again', async () => {
    const refresh = (token: string) => api.post('/widget/refresh', {}, { auth: token, origin: ORIGIN });
    let before = await newSession();
    const fresh = await rotateServerKey(deps(), t.integrationId);
    // the backend has an hour to deploy the new key: what the old key made is refreshed meanwhile
    for (let i = 0; i < 2; i++) {
      await h.clock.advanceSeconds(1500);
      const refreshed = await refresh(before);
      expect(refreshed.status).toBe(200);
      before = refreshed.body.widget_token;
    }
    await h.clock.advanceSeconds(ROTATED_KEY_REFRESH_GRACE_MS / 1000 - 3000);
    // past the grace: it still reads the state until it expires (the spec ends sessions at once only with the integration), but is not refreshed
    expect((await state(before)).status).toBe(200);
    const refused = await expectError(refresh(before), 401, 'unauthorized');
    expect(refused.body.message).toContain('rotated or revoked');
    // the backend's new key makes a session that refreshes
    t.serverKey = fresh;
    const after = await refresh(await newSession());
    expect(after.status).toBe(200);
    // revoking the key (no new one) is the same: refreshed within the grace, then not
    await revokeServerKey(deps(), t.integrationId);
    let token = after.body.widget_token;
    for (let i = 0; i < 2; i++) {
      await h.clock.advanceSeconds(1500);
      const refreshed = await refresh(token);
      expect(refreshed.status).toBe(200);
      token = refreshed.body.widget_token;
    }
    await h.clock.advanceSeconds(1500);
    await expectError(refresh(token), 401, 'unauthorized');
    t.serverKey = await rotateServerKey(deps(), t.integrationId);
  });

  it('a revoked integration gets no new key and cannot be enabled again, and its keys stay dead', async () => {
    const doomed = await seedTenant(h.services);
    const call = await api.get('/calls/ci_x', { auth: doomed.serverKey });
    expect(call.status).toBe(404);
    await revokeIntegration(h.services, doomed.integrationId);
    await expect(rotateServerKey(deps(), doomed.integrationId)).rejects.toThrow('revoked');
    await expect(setIntegrationEnabled(deps(), doomed.integrationId, true)).rejects.toThrow('revoked');
    const [row] = await h.services.db.query<{ status: string }>('SELECT status FROM integrations WHERE id = $1', [doomed.integrationId]);
    expect(row!.status).toBe('revoked');
    // a key left unrevoked by any path (issued directly) still does not work for a revoked integration
    const leftover = await h.services.db.tx((sql) => issueServerKey(sql, h.clock, doomed.integrationId));
    await expectError(api.get('/calls/ci_x', { auth: leftover.token }), 401, 'unauthorized');
  });

  // PGlite runs one transaction at a time: only PostgreSQL can interleave these.
  if (driver === 'pg') {
    it('a key revoke during a rotation revokes the key the rotation issues too', async () => {
      const other = await seedTenant(h.services);
      const live = async () => (await h.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM server_keys WHERE integration_id = $1 AND revoked_at IS NULL', [other.integrationId]))[0]!.n;
      let commit: () => void = () => {};
      let issuedYet: () => void = () => {};
      const keyIssued = new Promise<void>((resolve) => (issuedYet = resolve));
      let lockedYet: () => void = () => {};
      const locked = new Promise<void>((resolve) => (lockedYet = resolve));
      const rotating = h.services.db.tx(async (sql) => {
        // a rotation under way: the integration locked, the new key issued, not committed yet
        await sql.query('SELECT 1 FROM integrations WHERE id = $1 FOR UPDATE', [other.integrationId]);
        lockedYet();
        const issued = await issueServerKey(sql, h.clock, other.integrationId);
        const committing = new Promise<void>((resolve) => (commit = resolve));
        issuedYet();
        await committing;
        return issued;
      });
      // the revoke comes once the rotation holds the integration (before, it would simply go first)
      await locked;
      const revoking = revokeServerKey(deps(), other.integrationId);
      // (the revoke may wait on the lock before the key is issued: commit only once it is)
      await keyIssued;
      await vi.waitFor(async () => expect(await lockWaits()).toBeGreaterThan(0), { timeout: 10_000 });
      commit();
      const issued = await rotating;
      expect(await revoking).toBe(1); // the one the rotation issued (it revoked the old one itself)
      expect(await live()).toBe(0);
      await expectError(api.post('/sessions', { ...sessionBody(), integration_id: other.integrationId }, { auth: issued.token }), 401, 'unauthorized');
    });

    it('two members created at once whose e-mails differ only in case: one is made, the other refused', async () => {
      const attempts = await Promise.allSettled(
        ['Zed@acme.example', 'zed@acme.example', 'ZED@acme.example'].map((email) => createMember(deps(), { accountId: t.accountId, email, name: 'Zed' })),
      );
      expect(attempts.filter((attempt) => attempt.status === 'fulfilled')).toHaveLength(1);
      for (const attempt of attempts.filter((a): a is PromiseRejectedResult => a.status === 'rejected')) expect(String(attempt.reason)).toContain('has this e-mail already');
    });
  }

  it('a widget token works only from its own origin, and only until it expires', async () => {
    const token = await newSession();
    const ok = await state(token);
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ ok: true, engine: null, call: null, poll_ms: 3000, version: 1 });
    expect(ok.body.session_expires_at).toBe(Math.floor(h.clock.now() / 1000) + 1800);
    await expectError(state(token, 'https://evil.example'), 403, 'origin_not_allowed');
    await expectError(api.get('/widget/state', { auth: token }), 403, 'origin_not_allowed');
    await expectError(state(token, `${ORIGIN}/path`), 403, 'origin_not_allowed');
    await expectError(state('c2cw_' + 'x'.repeat(48)), 401, 'unauthorized');
    await expectError(state(t.serverKey), 401, 'unauthorized');

    await h.clock.advanceSeconds(1799);
    expect((await state(token)).status).toBe(200);
    await h.clock.advanceSeconds(1);
    await expectError(state(token), 401, 'unauthorized');
  });

  it('disabling or un-assigning the agent applies on the next widget request', async () => {
    const token = await newSession();
    await updateMember(deps(), t.agent.id, { enabled: false });
    await expectError(state(token), 403, 'agent_disabled');
    await updateMember(deps(), t.agent.id, { enabled: true });
    expect((await state(token)).status).toBe(200);
    await setCoverage(deps(), t.integrationId, { mode: 'members', inheritFuture: true, memberIds: [] });
    await expectError(state(token), 403, 'agent_not_assigned');
    await setCoverage(deps(), t.integrationId, { mode: 'departments', inheritFuture: true, departmentIds: [t.salesId] });
    expect((await state(token)).status).toBe(200);
  });

  it("removing the agent ends what its credentials open: widget token, launch ticket and engine token answer 401, and its identifier is unknown", async () => {
    const member = await createMember(deps(), { accountId: t.accountId, email: 'rita@acme.example', name: 'Rita', departmentId: t.salesId });
    const { widgetToken, engineToken } = await readyAgent(api, t, member.email);
    const ticket = await launchTicket(api, widgetToken);
    await updateMember(deps(), member.id, { removed: true });
    // widget/state documents 200, 401, 403: a token whose member is gone no longer stands
    const refused = await expectError(state(widgetToken), 401, 'unauthorized');
    expect(refused.body.message).toMatch(/no longer in the account/);
    await expectError(api.post('/widget/commands', { kind: 'availability', available: false, request_id: 'rq-removed-1' }, { auth: widgetToken, origin: ORIGIN }), 401, 'unauthorized');
    await expectError(heartbeat(api, engineToken), 401, 'unauthorized');
    await expectError(api.post('/engine/pair', { ticket, simulated: true }), 401, 'unauthorized');
    // looked up by its identifier, the member is simply not there
    await expectError(api.post('/sessions', { ...sessionBody(), agent: { type: 'email', value: member.email } }, { auth: t.serverKey }), 404, 'agent_unknown');
  });

  it('the platform switch makes every endpoint refuse at once, and back', async () => {
    const token = await newSession();
    const own = await seedTenant(h.services);
    const agent = await readyAgent(api, own);
    const ticket = await launchTicket(api, agent.widgetToken);
    await h.services.platform.setDisabled(true);
    // each family of routes checks it in its own authentication: server key, widget token, logout, window, pairing
    await expectError(api.post('/sessions', sessionBody(), { auth: t.serverKey }), 403, 'platform_disabled');
    await expectError(api.post('/calls', {}, { auth: t.serverKey }), 403, 'platform_disabled');
    await expectError(api.get('/calls/ci_x', { auth: t.serverKey }), 403, 'platform_disabled');
    await expectError(state(token), 403, 'platform_disabled');
    await expectError(api.post('/widget/revoke', undefined, { auth: token, origin: ORIGIN }), 403, 'platform_disabled');
    await expectError(heartbeat(api, agent.engineToken), 403, 'platform_disabled');
    await expectError(api.post('/engine/voice-token', undefined, { auth: agent.engineToken }), 403, 'platform_disabled');
    await expectError(api.post('/engine/pair', { ticket, simulated: true }), 403, 'platform_disabled');
    await expectError(api.post('/sessions', sessionBody()), 403, 'platform_disabled');
    await h.services.platform.setDisabled(false);
    expect((await state(token)).status).toBe(200);
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    // refused while off, the ticket was not used up
    expect((await api.post('/engine/pair', { ticket, simulated: true })).status).toBe(201);
  });

  it('revoking the integration ends every widget session at once and stops its key', async () => {
    const a = await newSession();
    const b = await newSession();
    const result = await revokeIntegration(h.services, t.integrationId);
    expect(result.sessions).toBeGreaterThanOrEqual(2);
    await expectError(state(a), 401, 'unauthorized');
    await expectError(state(b), 401, 'unauthorized');
    await expectError(api.post('/sessions', sessionBody(), { auth: t.serverKey }), 401, 'unauthorized');
  });
});
