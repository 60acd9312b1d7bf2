/**
 * Load shedding (C2C_MAX_EVENT_LOOP_DELAY_MS, @fastify/under-pressure): a node whose event loop lags
 * answers requests 503 service_unavailable with Retry-After, except /metrics, which is scraped most
 * of all then. The lag is made for real (the event loop blocked), since under-pressure samples it on
 * its own timer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe('a node shedding load', () => {
  let h: Harness;
  let api: Client;
  let t: Tenant;

  beforeAll(async () => {
    h = await createHarness('pglite', { maxEventLoopDelayMs: 1 });
    api = client(h.app);
    t = await seedTenant(h.services);
  });
  afterAll(() => h.close());

  it('refuses requests 503 with Retry-After while its event loop lags, and still serves /metrics', async () => {
    let shed: Awaited<ReturnType<Client['get']>> | undefined;
    for (let attempt = 0; attempt < 10 && shed?.status !== 503; attempt += 1) {
      const until = Date.now() + 1100;
      while (Date.now() < until) {
        /* the event loop blocked past under-pressure's 1 s sample, as by a long synchronous task */
      }
      await new Promise((resolve) => setTimeout(resolve, 20)); // its overdue sample runs
      shed = await api.get('/calls/ci_none', { auth: t.serverKey });
    }
    expect(shed).toMatchObject({ status: 503, body: { ok: false, error: 'service_unavailable' } });
    expect(shed!.headers['retry-after']).toBe('1');
    const metrics = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(200);
    expect(metrics.body).toContain('c2c_');
  }, 30_000);
});
