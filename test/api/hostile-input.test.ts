/**
 * Input that no schema names but every route must refuse cleanly (the envelope, a catalogue code,
 * never a 500 or a hang): NUL characters anywhere, JSON nested thousands deep, broken or overlong
 * paths; and what HTTP clients commonly send that must not be refused (an empty body labelled JSON).
 */
import http from 'node:http';
import { connect } from 'node:net';
import { PassThrough } from 'node:stream';
import { clientError } from '../../api/http/errors.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REQUEST_TIMEOUT_MS } from '../../api/app.js';
import { API_PREFIX } from '../../api/config.js';
import { PROVIDER_PATHS } from '../../api/providers/twiml.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, openSession, readyAgent, requestCall } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant, US_NUMBER, type Tenant } from '../helpers/tenant.js';

const NUL = '\u0000';

describe.each(storeDrivers())('hostile input on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const intents = async () => (await h.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM call_intents WHERE integration_id = $1', [t.integrationId]))[0]!.n;
  const refusedForNul = async (reply: Parameters<typeof expectError>[0]) => {
    const refused = await expectError(reply, 422, 'invalid_request');
    expect(refused.body.message).toContain('NUL');
  };

  let address: Promise<string> | undefined;
  /** The app on a real port (once per suite): what Node's own HTTP server does is seen only there. */
  const listening = () => (address ??= h.app.listen({ port: 0, host: '127.0.0.1' }));

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('refuses a NUL character in a body, a key or a query as invalid_request, and answers one in a path as not found, storing nothing', async () => {
    const call = { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: US_NUMBER };
    await refusedForNul(api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: `a${NUL}@acme.example` }, origin: ORIGIN }, { auth: t.serverKey }));
    await refusedForNul(api.post('/calls', { ...call, contact_reference: `crm${NUL}1` }, { auth: t.serverKey }));
    await refusedForNul(api.post('/calls', { ...call, metadata: { [`k${NUL}`]: 1 } }, { auth: t.serverKey }));
    // in a path it names nothing: not found (GET /calls/{id} answers 200 or 404)
    for (const reply of [api.get(`/calls/${encodeURIComponent(NUL)}`, { auth: t.serverKey }), api.post(`/calls/${encodeURIComponent(`ci_${NUL}`)}/hangup`, undefined, { auth: t.serverKey })]) {
      expect((await expectError(reply, 404, 'not_found')).body.message).toContain('NUL');
    }
    expect(await intents()).toBe(0);

    const widgetToken = await openSession(api, t);
    await refusedForNul(command(api, widgetToken, { kind: 'focus', request_id: `r${NUL}` }));
    await refusedForNul(api.get(`/widget/state?x=${encodeURIComponent(NUL)}`, { auth: widgetToken, origin: ORIGIN }));

    // Unauthenticated provider webhooks: refused before anything is looked up.
    const form = (body: string) => ({ raw: body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    await refusedForNul(api.post(`/${PROVIDER_PATHS.voice}`, undefined, form('To=ci_x&Biz=%00&CallerId=1')));
    await refusedForNul(api.post(`/${PROVIDER_PATHS.status}?intent=%00`, undefined, form('CallSid=CA1&CallStatus=ringing')));
  });

  it('refuses a provider webhook body that is not form parameters, saying that form parameters are expected', async () => {
    for (const path of [PROVIDER_PATHS.voice, `${PROVIDER_PATHS.status}?intent=ci_x`]) {
      for (const [type, raw] of [['text/plain', 'CallSid=CA1'], ['application/json', '{"CallSid":"CA1"}']]) {
        const refused = await expectError(api.post(`/${path}`, undefined, { raw, headers: { 'content-type': type! } }), 422, 'invalid_request');
        expect(refused.body.message, `${path} ${type}`).toContain('application/x-www-form-urlencoded');
      }
    }
  });

  it('refuses half a surrogate pair in a body or a key as invalid_request, so no store quietly rewrites or rejects it', async () => {
    const refusedForSurrogate = async (reply: Parameters<typeof expectError>[0]) => {
      const refused = await expectError(reply, 422, 'invalid_request');
      expect(refused.body.message).toContain('surrogate');
    };
    const call = { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: US_NUMBER };
    // jsonb refuses these outright: this was a 500
    await refusedForSurrogate(api.post('/calls', { ...call, metadata: { a: '\ud800' } }, { auth: t.serverKey }));
    await refusedForSurrogate(api.post('/calls', { ...call, metadata: { '\udc00': 1 } }, { auth: t.serverKey }));
    expect(await intents()).toBe(0);

    // A text column stores U+FFFD instead, so two different ids became one: the second command was
    // answered as a replay of the first and never ran.
    const widgetToken = await openSession(api, t);
    await refusedForSurrogate(command(api, widgetToken, { kind: 'focus', request_id: 'q\udc01' }));
    await refusedForSurrogate(command(api, widgetToken, { kind: 'availability', request_id: 'q\udc02', available: false }));
    const stored = await h.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM widget_commands');
    expect(stored[0]!.n).toBe(0);

    // A well-formed pair is one character, taken as any other (and judged on its merits: no agent here is online).
    await expectError(api.post('/calls', { ...call, metadata: { '\ud83d\ude00': '\ud83d\ude00' } }, { auth: t.serverKey }), 409, 'agent_offline');
    await expectError(command(api, widgetToken, { kind: 'focus', request_id: 'q\ud83d\ude00' }), 409, 'invalid_state');
  });

  it('refuses a body that is not UTF-8, rather than read each bad byte as U+FFFD (two ids would be one command)', async () => {
    const widgetToken = await openSession(api, t);
    const bytes = (id: number[]) => Buffer.concat([Buffer.from('{"kind":"focus","request_id":"u8-'), Buffer.from(id), Buffer.from('"}')]);
    for (const bad of [[0xff], [0xc3], [0xfe]]) {
      const refused = await expectError(api.post('/widget/commands', undefined, { auth: widgetToken, origin: ORIGIN, raw: bytes(bad), headers: { 'content-type': 'application/json' } }), 422, 'invalid_request');
      expect(refused.body.message).toContain('UTF-8');
    }
    expect((await h.services.db.query<{ n: number }>("SELECT count(*)::int AS n FROM widget_commands WHERE request_id LIKE 'u8-%'"))[0]!.n).toBe(0);
    // well-formed UTF-8 beyond ASCII is text like any other (judged on its merits: no window here)
    await expectError(api.post('/widget/commands', undefined, { auth: widgetToken, origin: ORIGIN, raw: bytes([0xc3, 0xa9]), headers: { 'content-type': 'application/json' } }), 409, 'invalid_state');
  });

  it('refuses a number too large to hold, which would be stored as null and match a replay with another body', async () => {
    const call = `{"integration_id":"${t.integrationId}","agent":{"type":"email","value":"${t.agent.email}"},"phone_number":"${US_NUMBER}","metadata":{"n":1e400}}`;
    const refused = await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: call, headers: { 'content-type': 'application/json', 'idempotency-key': 'huge-1' } }), 422, 'invalid_request');
    expect(refused.body.message).toContain('finite');
    expect(await intents()).toBe(0);
  });

  it("refuses an integer a double holds only rounded (a CRM's 20-digit id), which was stored changed and matched a replay of the id's next value", async () => {
    const call = (id: string) => `{"integration_id":"${t.integrationId}","agent":{"type":"email","value":"${t.agent.email}"},"phone_number":"${US_NUMBER}","metadata":{"crm_id":${id}}}`;
    for (const id of ['12345678901234567890', '-9007199254740993', '1e20']) {
      const refused = await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: call(id), headers: { 'content-type': 'application/json', 'idempotency-key': 'big-1' } }), 422, 'invalid_request');
      expect(refused.body.message).toContain('as strings');
    }
    expect(await intents()).toBe(0);
    // the largest exact integers, and decimals, are judged on their merits (no window here)
    for (const id of ['9007199254740991', '-9007199254740991', '0.5', '1e-7']) {
      await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: call(id), headers: { 'content-type': 'application/json' } }), 409, 'agent_offline');
    }
  });

  it('refuses a body over 64 KB with 413 in the envelope (the catalogue\'s invalid_request), creating nothing', async () => {
    const metadata = JSON.stringify({ note: 'x'.repeat(70 * 1024) });
    const call = `{"integration_id":"${t.integrationId}","agent":{"type":"email","value":"${t.agent.email}"},"phone_number":"${US_NUMBER}","metadata":${metadata}}`;
    const refused = await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: call, headers: { 'content-type': 'application/json' } }), 413, 'invalid_request');
    expect(refused.body.message).toContain('64 KB');
    expect(await intents()).toBe(0);
  });

  it('refuses keys that could reach a prototype by name (not as "not valid JSON"), and takes a plain constructor key', async () => {
    const withMetadata = (metadata: string) =>
      api.post('/calls', undefined, {
        auth: t.serverKey,
        raw: `{"integration_id":"${t.integrationId}","agent":{"type":"email","value":"${t.agent.email}"},"phone_number":"${US_NUMBER}","metadata":${metadata}}`,
        headers: { 'content-type': 'application/json' },
      });
    expect((await expectError(withMetadata('{"__proto__":"x"}'), 422, 'invalid_request')).body.message).toContain('__proto__');
    expect((await expectError(withMetadata('{"constructor":{"prototype":{"x":1}}}'), 422, 'invalid_request')).body.message).toContain('prototype');
    await expectError(withMetadata('{"constructor":"x","prototype":1}'), 409, 'agent_offline');
    expect(await intents()).toBe(0);
  });

  it('refuses JSON nested thousands deep as invalid_request, not a stack overflow', async () => {
    const deep = `${'['.repeat(5000)}1${']'.repeat(5000)}`; // 10 KB: within the body limit
    const body = `{"integration_id":"${t.integrationId}","agent":{"type":"email","value":"${t.agent.email}"},"phone_number":"${US_NUMBER}","metadata":{"a":${deep}}}`;
    const refused = await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: body, headers: { 'content-type': 'application/json' } }), 422, 'invalid_request');
    expect(refused.body.message).toContain('nested');
    // Metadata as deep as the contract allows is judged by its size, as before.
    const allowed = { a: JSON.parse(`${'['.repeat(29)}1${']'.repeat(29)}`) };
    const answer = await api.post('/calls', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: US_NUMBER, metadata: allowed }, { auth: t.serverKey });
    expect(answer.body.error).toBe('agent_offline');
    expect(await intents()).toBe(0);
  });

  it('answers a broken or overlong path as an unknown address, in the envelope, without echoing it', async () => {
    const bad = await h.app.inject({ method: 'GET', url: `${API_PREFIX}/calls/%ZZ`, headers: { authorization: `Bearer ${t.serverKey}` } });
    expect(bad.statusCode).toBe(404);
    expect(bad.json()).toMatchObject({ ok: false, error: 'not_found' });
    const long = 'x'.repeat(5000);
    const overlong = await h.app.inject({ method: 'GET', url: `${API_PREFIX}/calls/${long}`, headers: { authorization: `Bearer ${t.serverKey}` } });
    expect(overlong.statusCode).toBe(404);
    expect(overlong.json()).toMatchObject({ ok: false, error: 'not_found' });
    expect(overlong.body).not.toContain(long);
    // as long as the router takes, but longer than any id we make: still no such call
    for (const id of ['x'.repeat(65), 'x'.repeat(100)]) {
      const unknown = await h.app.inject({ method: 'GET', url: `${API_PREFIX}/calls/${id}`, headers: { authorization: `Bearer ${t.serverKey}` } });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toMatchObject({ ok: false, error: 'not_found' });
      const hangup = await h.app.inject({ method: 'POST', url: `${API_PREFIX}/calls/${id}/hangup`, headers: { authorization: `Bearer ${t.serverKey}` } });
      expect(hangup.statusCode).toBe(404);
    }
  });

  it('answers an unknown address, or a known one with another method, 404 in the envelope', async () => {
    for (const [method, url] of [['GET', '/nope'], ['GET', `${API_PREFIX}/nope`], ['DELETE', `${API_PREFIX}/calls/ci_x`], ['PUT', `${API_PREFIX}/sessions`], ['GET', `${API_PREFIX}/widget/commands`]] as const) {
      const answer = await h.app.inject({ method, url, headers: { authorization: `Bearer ${t.serverKey}` } });
      expect(answer.statusCode, `${method} ${url}`).toBe(404);
      expect(answer.headers['content-type']).toMatch(/^application\/json/);
      expect(answer.json()).toEqual({ ok: false, error: 'not_found', message: expect.any(String) });
    }
  });

  it('takes an empty body labelled application/json as no body where the spec gives none, and refuses it where one is needed', async () => {
    const json = { 'content-type': 'application/json' };
    const agent = await readyAgent(api, t);
    const queued = await requestCall(api, t);
    expect(queued.status).toBe(202);
    const hungUp = await api.post(`/calls/${queued.body.call_id}/hangup`, undefined, { auth: t.serverKey, raw: '', headers: json });
    expect(hungUp.status, JSON.stringify(hungUp.body)).toBe(200);
    const ticket = await api.post('/widget/launch-ticket', undefined, { auth: agent.widgetToken, origin: ORIGIN, raw: '', headers: json });
    expect(ticket.status, JSON.stringify(ticket.body)).toBe(200);
    await expectError(api.post('/calls', undefined, { auth: t.serverKey, raw: '', headers: json }), 422, 'invalid_request');
  });

  it("takes an empty body of any other type as no body (curl -d '', PHP's and Java's clients label a bodiless POST a form); a body there must be JSON", async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const own = await seedTenant(h.services); // an agent of its own, not on another test's call
    await readyAgent(api, own);
    const queued = await requestCall(api, own);
    expect(queued.status).toBe(202);
    const hungUp = await api.post(`/calls/${queued.body.call_id}/hangup`, undefined, { auth: own.serverKey, raw: '', headers: form });
    expect(hungUp.status, JSON.stringify(hungUp.body)).toBe(200);
    expect(hungUp.body.status).toBe('canceled');
    await expectError(api.post(`/calls/${queued.body.call_id}/hangup`, undefined, { auth: own.serverKey, raw: 'reason=done', headers: form }), 422, 'invalid_request');
    await expectError(api.post('/calls', undefined, { auth: own.serverKey, raw: '', headers: { 'content-type': 'application/octet-stream' } }), 422, 'invalid_request');
    // text/plain alike (fetch(url, {method: 'POST', body: ''}) sends it): empty is no body, text is refused
    const text = { 'content-type': 'text/plain;charset=UTF-8' };
    const agent = await readyAgent(api, await seedTenant(h.services));
    const closed = await api.post('/engine/close', undefined, { auth: agent.engineToken, raw: '', headers: text });
    expect(closed.status, JSON.stringify(closed.body)).toBe(200);
    await expectError(api.post(`/calls/${queued.body.call_id}/hangup`, undefined, { auth: own.serverKey, raw: 'x', headers: text }), 422, 'invalid_request');
  });

  it('answers an empty call id as no such call (404), never 422: the spec gives these routes 200 or 404', async () => {
    await expectError(api.get('/calls/', { auth: t.serverKey }), 404, 'not_found');
    await expectError(api.post('/calls//hangup', undefined, { auth: t.serverKey }), 404, 'not_found');
  });

  it('takes a request with no body at all (no Content-Type), or a JSON null, as no body where the body is optional', async () => {
    const own = await seedTenant(h.services); // an agent of its own, not on another test's call
    const agent = await readyAgent(api, own);
    const bare = (path: string) =>
      h.app.inject({ method: 'POST', url: `${API_PREFIX}${path}`, headers: { authorization: `Bearer ${agent.engineToken}`, 'content-length': '0' } });
    const hangup = await bare('/engine/hangup');
    expect(hangup.statusCode, hangup.body).toBe(200);
    expect(hangup.json()).toEqual({ ok: true, call: null });
    const nullHangup = await api.post('/engine/hangup', undefined, { auth: agent.engineToken, raw: 'null', headers: { 'content-type': 'application/json' } });
    expect(nullHangup.status, JSON.stringify(nullHangup.body)).toBe(200);
    const closed = await bare('/engine/close');
    expect(closed.statusCode, closed.body).toBe(200);
    expect(closed.json()).toEqual({ ok: true, closed: true });
  });

  it('lets go of a request whose body never arrives: the server bounds receiving one, and says so in the envelope', async () => {
    // Node's http server answers 408 and closes once a request has not fully arrived within this;
    // fastify's default is no bound, which let a short body behind a long Content-Length hang.
    expect(h.app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(REQUEST_TIMEOUT_MS).toBeGreaterThan(0);
    // it looks for such requests every few seconds, not every 30 s (Node's default: a 408 a minute late)
    expect((h.app.server as unknown as { connectionsCheckingInterval: number }).connectionsCheckingInterval).toBeLessThanOrEqual(5000);
    // the 408 itself, as Node's server hands the timeout over (Node's own clock: not waited for here)
    const socket = new PassThrough();
    socket.on('error', () => undefined); // destroyed with the timeout, as Node's own handler does
    let written = '';
    socket.on('data', (chunk) => (written += chunk));
    clientError(Object.assign(new Error('timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), socket);
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(JSON.parse(written.split('\r\n\r\n')[1]!)).toMatchObject({ ok: false, error: 'invalid_request' });
    expect(socket.destroyed).toBe(true);
  });

  it("answers what Node's HTTP parser refuses in the envelope: headers too large (431), a request that is not HTTP (400)", async () => {
    const address = new URL(await listening());
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(address.port), address.hostname, () => socket.end(request));
        let text = '';
        socket.on('data', (chunk) => (text += chunk));
        socket.on('close', () => resolve(text));
        socket.on('error', reject);
      });
    const answers = [
      await raw(`GET ${API_PREFIX}/calls/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`),
      await raw('GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n'),
      await raw('NOT HTTP AT ALL\r\n\r\n'),
    ];
    expect(answers.map((answer) => answer.split(' ')[1])).toEqual(['431', '400', '400']);
    for (const answer of answers) expect(JSON.parse(answer.split('\r\n\r\n')[1]!)).toEqual({ ok: false, error: 'invalid_request', message: expect.any(String) });
  });

  it('refuses an Idempotency-Key sent twice (Node would join the two into a third key), over a real connection', async () => {
    const address = await listening();
    const post = (keys: string[]) =>
      new Promise<{ status: number; body: any }>((resolve, reject) => {
        const body = JSON.stringify({ integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: US_NUMBER });
        const request = http.request(`${address}${API_PREFIX}/calls`, { method: 'POST', headers: { authorization: `Bearer ${t.serverKey}`, 'content-type': 'application/json' } }, (response) => {
          let text = '';
          response.on('data', (chunk) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode!, body: JSON.parse(text) }));
        });
        request.setHeader('idempotency-key', keys);
        request.on('error', reject);
        request.end(body);
      });
    const before = await intents();
    const twice = await post(['order-1', 'order-2']);
    expect(twice).toMatchObject({ status: 422, body: { ok: false, error: 'invalid_request' } });
    expect(twice.body.message).toContain('idempotency-key');
    expect(await intents()).toBe(before);
    // Once, the same request is taken.
    expect(await post(['order-1'])).toMatchObject({ status: 202, body: { ok: true, status: 'queued' } });
    expect(await intents()).toBe(before + 1);
  });
});
