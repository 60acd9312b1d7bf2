/**
 * Secrets are never logged: a whole session's requests, logged at the most verbose level with
 * every request's headers, leave no server key, widget token, launch ticket or engine token in the
 * log (they are redacted, and the ticket travels in the body, never in a URL).
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { launchTicket, openSession, requestCall } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe('logs', () => {
  let h: Harness;
  let t: Tenant;
  const lines: string[] = [];

  beforeAll(async () => {
    h = await createHarness('pglite', { logLevel: 'trace' });
    t = await seedTenant(h.services);
  });
  afterAll(() => h.close());

  it('hold no credential, even with request headers logged', async () => {
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    // Headers are logged on purpose here: the redaction must hold even for a verbose serializer.
    const app = await buildApp(h.services, {
      logger: { level: 'trace', stream, serializers: { req: (req: { method: string; url: string; headers: unknown }) => ({ method: req.method, url: req.url, headers: req.headers }) } },
    });
    await app.ready();
    const api = client(app);
    const widgetToken = await openSession(api, t, t.agent.email);
    const ticket = await launchTicket(api, widgetToken);
    const paired = await api.post('/engine/pair', { ticket, simulated: true });
    const engineToken: string = paired.body.engine_token;
    await api.post('/engine/heartbeat', { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null, acks: [] }, { auth: engineToken });
    await api.get('/widget/state', { auth: widgetToken, origin: ORIGIN });
    await requestCall(api, t);
    await api.get('/widget/state', { auth: `${widgetToken}x`, origin: ORIGIN });
    await app.close();

    const log = lines.join('');
    expect(log).toContain('/engine/pair');
    expect(log).toContain('[Redacted]');
    for (const secret of [t.serverKey, widgetToken, ticket, engineToken]) {
      expect(secret.length).toBeGreaterThan(20);
      expect(log).not.toContain(secret);
      // nor the secret part alone, in case something logged a credential taken apart
      expect(log).not.toContain(secret.slice(-16));
    }
  });
});
