/**
 * CORS on the gateway's long-polling transport (gateway/cors.ts): the REST origin rules, an
 * integration's pages and the service's own. Browsers fall back to long-polling on networks that
 * block WebSockets, and without these headers they would not let the page read a single answer.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIntegration, setOrigins } from '../../api/domain/operator/integrations.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

const STRANGER = 'https://stranger.example';
/** The pages of a second integration, which only the preflight test sends. */
const HELPDESK = 'https://helpdesk.example.com';

describe('gateway CORS (long-polling)', () => {
  let live: GatewayHarness;
  let polling: string;
  let tenantIntegration: string;

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
    const { services } = live.h;
    const tenant = await seedTenant(services);
    tenantIntegration = tenant.integrationId;
    await createIntegration({ db: services.db, bus: services.bus, clock: services.clock }, { accountId: tenant.accountId, name: 'Acme Helpdesk', origins: [HELPDESK] });
    polling = `${live.url}/socket.io/?EIO=4&transport=polling`;
  });
  afterAll(() => live.close());

  const handshake = (origin: string) => fetch(polling, { headers: { origin } });

  it("lets an integration's page read the handshake from its first request on, and not a stranger", async () => {
    const allowed = await handshake(ORIGIN);
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(allowed.headers.get('vary')).toBe('Origin');
    expect(await allowed.text()).toMatch(/^0\{"sid"/);

    const stranger = await handshake(STRANGER);
    expect(stranger.status).toBe(200);
    expect(stranger.headers.get('access-control-allow-origin')).toBeNull();
  });

  it("lets the service's own pages (the call window) read it", async () => {
    const own = await handshake(live.h.services.config.siteUrl);
    expect(own.headers.get('access-control-allow-origin')).toBe(live.h.services.config.siteUrl);
  });

  it('carries the headers on the rest of the session: a POST and the poll that answers it', async () => {
    const sid = (JSON.parse((await (await handshake(ORIGIN)).text()).slice(1)) as { sid: string }).sid;
    const posted = await fetch(`${polling}&sid=${sid}`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'text/plain;charset=UTF-8' }, body: '40' });
    expect(posted.status).toBe(200);
    expect(posted.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    const polled = await fetch(`${polling}&sid=${sid}`, { headers: { origin: ORIGIN } });
    expect(polled.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    // no token was sent: the CONNECT is refused, and the page can read why
    expect(await polled.text()).toMatch(/^44\{.*"code":"unauthorized"/);
  });

  it('answers preflights for its own origins, with the headers asked for, and not for a stranger', async () => {
    const preflight = (origin: string) =>
      fetch(polling, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-custom' } });
    const allowed = await preflight(HELPDESK);
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe(HELPDESK);
    expect(allowed.headers.get('access-control-allow-methods')).toBe('GET,POST');
    expect(allowed.headers.get('access-control-allow-headers')).toBe('x-custom');

    const stranger = await preflight('https://another-stranger.example');
    expect(stranger.status).toBe(204);
    expect(stranger.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('admits an origin an integration has just added from its first request, and forgets one just removed', async () => {
    const { services } = live.h;
    const deps = { db: services.db, bus: services.bus, clock: services.clock };
    const added = 'https://added-later.example';
    expect((await handshake(added)).headers.get('access-control-allow-origin')).toBeNull();
    await setOrigins(deps, tenantIntegration, [ORIGIN, added]);
    expect((await handshake(added)).headers.get('access-control-allow-origin')).toBe(added);
    await setOrigins(deps, tenantIntegration, [ORIGIN]);
    // the first answer after a removal may be the last one read; the one after is the store's
    await handshake(added);
    expect((await handshake(added)).headers.get('access-control-allow-origin')).toBeNull();
    expect((await handshake(ORIGIN)).headers.get('access-control-allow-origin')).toBe(ORIGIN);
  });

  it("admits a new integration's origins from their first request", async () => {
    const { services } = live.h;
    expect((await handshake(ORIGIN)).headers.get('access-control-allow-origin')).toBe(ORIGIN); // read
    const [row] = await services.db.query<{ account_id: string }>('SELECT account_id FROM integrations WHERE id = $1', [tenantIntegration]);
    await createIntegration({ db: services.db, bus: services.bus, clock: services.clock }, { accountId: row!.account_id, name: 'Newly made', origins: ['https://newly-made.example'] });
    expect((await handshake('https://newly-made.example')).headers.get('access-control-allow-origin')).toBe('https://newly-made.example');
  });

  it('reads the store once for handshakes and preflights from any number of made-up origins', async () => {
    // an integration changed: what earlier tests read is forgotten, so these must read (once)
    live.h.services.bus.publish({ type: 'integration', integrationId: tenantIntegration });
    const query = vi.spyOn(live.h.services.db, 'query');
    const originReads = () => query.mock.calls.filter(([sql]) => String(sql).includes('allowed_origins')).length;
    try {
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 ? handshake(`https://made-up-${i}.example`) : fetch(polling, { method: 'OPTIONS', headers: { origin: `https://made-up-${i}.example`, 'access-control-request-method': 'GET' } }),
        ),
      );
      expect(answers.every((res) => res.headers.get('access-control-allow-origin') === null)).toBe(true);
      expect(originReads()).toBe(1);
    } finally {
      query.mockRestore();
    }
  });
});
