/**
 * Secrets are never logged: a whole session's requests, logged at the most verbose level with
 * every request's headers, leave no server key, widget token, launch ticket or engine token in the
 * log (they are redacted, and the ticket travels in the body, never in a URL). Nor is a request's
 * data when a statement fails: the store's error is logged without its statement, parameters or
 * the text that quotes them.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/app.js';
import { storeDrivers } from '../helpers/env.js';
import { launchTicket, openSession, readyAgent, requestCall } from '../helpers/flows.js';
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

describe.each(storeDrivers())('logs of a failed statement on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
  });
  afterAll(() => h.close());

  it('hold neither the statement nor its parameters, nor text quoting them', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const app = await buildApp(h.services, { logger: { level: 'error', stream } });
    await app.ready();
    const api = client(app);
    await readyAgent(api, t);
    // A constraint no new call meets, whose failures quote the row (a check violation's detail) or
    // a value (a data exception's message): the insert of a call fails as a bug would.
    await h.services.db.query(`ALTER TABLE call_intents ADD CONSTRAINT fails_for_test CHECK ((metadata->>'crm_id')::int IS NOT NULL) NOT VALID`);
    const secrets = { note: 'note-secret-5521', crm_id: 'crm-secret-7734' };
    const violated = await requestCall(api, t, { metadata: { note: secrets.note }, display_name: 'Name Secret' });
    expect(violated.status, JSON.stringify(violated.body)).toBe(500);
    expect(violated.body.error).toBe('internal_error');
    const unparsed = await requestCall(api, t, { metadata: { crm_id: secrets.crm_id } });
    expect(unparsed.status, JSON.stringify(unparsed.body)).toBe(500);
    await app.close();

    const log = lines.join('');
    expect(log).toContain('unhandled error');
    expect(log).toContain('23514'); // what failed is still there: the SQLSTATE,
    expect(log).toContain('fails_for_test'); // the constraint,
    expect(log).toContain('22P02');
    expect(log).toContain('    at '); // and where in the code
    for (const data of ['2025550123', secrets.note, secrets.crm_id, 'Name Secret', t.integrationId, 'INSERT INTO', 'call_intents (']) {
      expect(log).not.toContain(data);
    }
  });
});
