/** CORS on the widget API (spec section 5, rule 4): only origins some active integration allows. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIntegration, setAllowAllOrigins, setIntegrationEnabled } from '../../api/domain/operator/integrations.js';
import { storeDrivers } from '../helpers/env.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('widget CORS on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const deps = () => ({ db: h.services.db, bus: h.services.bus, clock: h.services.clock });
  const preflight = (origin: string) =>
    api.options('/widget/state', { origin, headers: { 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('answers a preflight from an allowed origin with that origin', async () => {
    const res = await preflight(ORIGIN);
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
    expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
  });

  it('answers an OPTIONS that names no Access-Control-Request-Method (no browser sends one) as a preflight, not with a bare text error', async () => {
    const res = await api.options('/widget/state', { origin: ORIGIN });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(ORIGIN);
  });

  it('gives no Access-Control-Allow-Origin to any other origin, on preflight or on a real request', async () => {
    expect((await preflight('https://evil.example')).headers['access-control-allow-origin']).toBeUndefined();
    const res = await api.get('/widget/state', { origin: 'https://evil.example' });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.status).toBe(401);
  });

  it('follows integration changes: allow-all, and a disabled integration', async () => {
    await setAllowAllOrigins(deps(), t.integrationId, true);
    expect((await preflight('https://anywhere.example')).headers['access-control-allow-origin']).toBe('https://anywhere.example');
    await setAllowAllOrigins(deps(), t.integrationId, false);
    expect((await preflight('https://anywhere.example')).headers['access-control-allow-origin']).toBeUndefined();
    await setIntegrationEnabled(deps(), t.integrationId, false);
    expect((await preflight(ORIGIN)).headers['access-control-allow-origin']).toBeUndefined();
    await setIntegrationEnabled(deps(), t.integrationId, true);
    expect((await preflight(ORIGIN)).headers['access-control-allow-origin']).toBe(ORIGIN);
  });

  it('reads the store once for any number of origins arriving together or after, made-up ones included, and again after an integration changes', async () => {
    const query = vi.spyOn(h.services.db, 'query');
    const originReads = () => query.mock.calls.filter(([sql]) => String(sql).includes('allowed_origins')).length;
    try {
      await setAllowAllOrigins(deps(), t.integrationId, false); // forgets what earlier tests read
      const together = await Promise.all(Array.from({ length: 30 }, (_, i) => preflight(`https://made-up-${i}.example`)));
      expect(together.every((res) => res.headers['access-control-allow-origin'] === undefined)).toBe(true);
      expect(originReads()).toBe(1);
      for (let i = 30; i < 60; i += 1) expect((await preflight(`https://made-up-${i}.example`)).headers['access-control-allow-origin']).toBeUndefined();
      expect((await preflight(ORIGIN)).headers['access-control-allow-origin']).toBe(ORIGIN);
      expect(originReads()).toBe(1);
      // a change forgets what was read, and a read under way: the next request reads again
      await setAllowAllOrigins(deps(), t.integrationId, true);
      expect((await preflight('https://made-up-0.example')).headers['access-control-allow-origin']).toBe('https://made-up-0.example');
      expect(originReads()).toBe(2);
    } finally {
      query.mockRestore();
      await setAllowAllOrigins(deps(), t.integrationId, false);
    }
  });

  it("answers for a new integration's origins from its first request, once the allowed origins were read before it was made", async () => {
    expect((await preflight(ORIGIN)).headers['access-control-allow-origin']).toBe(ORIGIN); // read
    await createIntegration(deps(), { accountId: t.accountId, name: 'Newly made', origins: ['https://newly-made.example'] });
    expect((await preflight('https://newly-made.example')).headers['access-control-allow-origin']).toBe('https://newly-made.example');
  });

  it('gives the server-key routes no CORS, from any origin: a server key is never in a page', async () => {
    for (const path of ['/sessions', '/calls', '/calls/ci_x', '/calls/ci_x/hangup']) {
      const res = await api.options(path, { origin: ORIGIN, headers: { 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' } });
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      expect(res.status).toBe(404);
    }
    await setAllowAllOrigins(deps(), t.integrationId, true);
    try {
      const created = await api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey, origin: ORIGIN });
      expect(created.status).toBe(201);
      expect(created.headers['access-control-allow-origin']).toBeUndefined();
      // the widget's own routes keep theirs
      expect((await api.get('/widget/state', { auth: created.body.widget_token, origin: ORIGIN })).headers['access-control-allow-origin']).toBe(ORIGIN);
    } finally {
      await setAllowAllOrigins(deps(), t.integrationId, false);
    }
  });

  it("admits the service's own site on the engine endpoints (a call window not on the API's origin), and not on the widget's, which no integration allows it", async () => {
    const preflight = { 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' };
    const res = await api.options('/engine/heartbeat', { origin: h.config.siteUrl, headers: preflight });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(h.config.siteUrl);
    const widget = await api.options('/widget/commands', { origin: h.config.siteUrl, headers: preflight });
    expect(widget.headers['access-control-allow-origin']).toBeUndefined();
  });
});
