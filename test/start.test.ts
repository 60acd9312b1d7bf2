/**
 * What `npm start` does (issue: Foundation, item 9): the service on the embedded store, the demo
 * tenant seeded idempotently, demo.json written, and the demo credentials working from outside.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { freePort } from './helpers/processes.js';
import { startCrmDemo } from '../examples/crm-demo/server.js';
import { ConfigError, loadConfig, loopbackGatewayWarning, loopbackWebhookWarning } from '../api/config.js';
import { localUrl, startNode, type RunningNode } from '../api/serve.js';

describe('npm start with the demo flag', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-start-'));
  let demoPort = 0;
  const config = () => loadConfig({ C2C_DATA_DIR: dataDir, PORT: '0', GATEWAY_PORT: '0', DEMO_PORT: String(demoPort), LOG_LEVEL: 'silent' });
  beforeAll(async () => {
    demoPort = await freePort();
  });
  let node: RunningNode | undefined;
  afterAll(async () => {
    await node?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const post = (base: string, path: string, key: string, body: unknown) =>
    fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('serves /healthz and writes demo.json with working credentials', async () => {
    node = await startNode(config(), { demo: true, logger: false });
    expect(await (await fetch(`${node.url}/healthz`)).json()).toEqual({ ok: true, store: 'pglite', bus: 'up' });
    const demo = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'));
    expect(Object.keys(demo).sort()).toEqual(['agent', 'agent_disabled', 'agent_unassigned', 'allowed_origin', 'base_url', 'integration_id', 'server_key', 'site_url']);
    expect(demo.allowed_origin).toBe(`http://127.0.0.1:${demoPort}`);

    const base = `${node.url}/api/v1/click2call`;
    const session = await post(base, '/sessions', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent, origin: demo.allowed_origin });
    expect(session.status).toBe(201);
    const disabled = await post(base, '/sessions', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent_disabled, origin: demo.allowed_origin });
    expect(disabled.status).toBe(403);
    expect((await disabled.json()).error).toBe('agent_disabled');
    const outside = await post(base, '/sessions', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent_unassigned, origin: demo.allowed_origin });
    expect((await outside.json()).error).toBe('agent_not_assigned');
    const call = await post(base, '/calls', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent, phone_number: '+442079460123' });
    expect(call.status).toBe(409);
    expect((await call.json()).error).toBe('agent_offline');
  });

  it('keeps other users of the machine out of the embedded store (PGlite writes its files world-writable)', () => {
    expect(statSync(join(dataDir, 'pglite')).mode & 0o777).toBe(0o700);
  });

  it('runs the demo CRM, whose endpoints pass the service\'s answers through unchanged', async () => {
    const crm = `http://127.0.0.1:${demoPort}`;
    const visit = await fetch(`${crm}/`);
    const page = await visit.text();
    expect(page).toContain('/assets/js/click2call-sdk.js');
    // the API's public address, given to the SDK: the script's origin is not it when PUBLIC_SITE_URL differs
    const demo = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'));
    expect(page).toContain(`apiBaseUrl: ${JSON.stringify(demo.base_url)}`);
    expect(page).not.toMatch(/\+44|\+1202/);
    // a strict policy: no other site frames the CRM; the page's inline script and style run by this response's nonce
    const policy = visit.headers.get('content-security-policy')!;
    expect(visit.headers.get('cache-control')).toBe('no-store');
    expect(policy).toContain("frame-ancestors 'none'");
    const nonce = /script-src 'nonce-([^']+)'/.exec(policy)?.[1];
    expect(page).toContain(`<script nonce="${nonce}">`);
    expect(page).toContain(`<style nonce="${nonce}">`);
    expect(/script-src 'nonce-([^']+)'/.exec((await (await fetch(`${crm}/`)).headers.get('content-security-policy'))!)?.[1]).not.toBe(nonce);
    const agent = signedIn(visit);
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${crm}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', origin: crm, ...headers }, body: JSON.stringify(body) });
    const session = await post('/click2call/session', { origin: crm }, { cookie: agent });
    expect(session.status).toBe(201);
    expect((await session.json()).widget_token).toMatch(/^c2cw_/);
    const call = await post('/click2call/call', { contact_reference: 'crm-1001', request_id: 'click-0001' }, { cookie: agent });
    expect(call.status).toBe(409);
    expect((await call.json()).error).toBe('agent_offline');
    const disabled = signedIn(await fetch(`${crm}/?as=disabled`));
    const refused = await post('/click2call/session', { origin: crm }, { cookie: disabled });
    expect(refused.status).toBe(403);
    expect((await refused.json()).error).toBe('agent_disabled');
  });

  it('the demo CRM acts only for a user signed in on its own pages', async () => {
    const crm = `http://127.0.0.1:${demoPort}`;
    const agent = signedIn(await fetch(`${crm}/`));
    const post = (path: string, headers: Record<string, string>, body: unknown = { origin: crm }) =>
      fetch(`${crm}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    // nobody signed in: 401, as the SDK expects of a session endpoint
    const anonymous = await post('/click2call/session', { origin: crm });
    expect([anonymous.status, (await anonymous.json()).error]).toEqual([401, 'unauthorized']);
    // a cookie a page wrote itself (the old unsigned name) or forged is nobody
    for (const cookie of ['crm_user=agent', `crm_session=agent.${'A'.repeat(43)}`, agent.replace(/^crm_session=agent/, 'crm_session=disabled')]) {
      expect((await post('/click2call/session', { origin: crm, cookie })).status, cookie).toBe(401);
    }
    // another site's page, with the agent's cookie: refused, nothing rings
    for (const path of ['/click2call/session', '/click2call/call', '/demo/incoming']) {
      const forged = await post(path, { origin: 'https://evil.example', cookie: agent });
      expect([forged.status, (await forged.json()).error], path).toEqual([403, 'unauthorized']);
      expect((await post(path, { cookie: agent })).status, `${path} without Origin`).toBe(403);
    }
    // a request_id that is not one is refused, not sent as an Idempotency-Key
    const odd = await post('/click2call/call', { origin: crm, cookie: agent }, { contact_reference: 'crm-1001', request_id: { a: 1 } });
    expect([odd.status, (await odd.json()).error]).toEqual([422, 'invalid_request']);
    // ?as= names only the demo's own users
    expect(signedIn(await fetch(`${crm}/?as=constructor`))).toMatch(/^crm_session=agent\./);
    // a session is made for the CRM's own origin only, never for one the browser names
    const elsewhere = await post('/click2call/session', { origin: crm, cookie: agent }, { origin: 'https://evil.example' });
    expect([elsewhere.status, (await elsewhere.json()).error]).toEqual([403, 'unauthorized']);
  });

  it('the demo CRM asks POST /calls again, with the same Idempotency-Key, when the first answer is lost', async () => {
    // Between the CRM and the service, a hop that drops the first request's connection unanswered.
    const seen: Array<string | undefined> = [];
    const hop = createServer(async (request, response) => {
      seen.push(request.headers['idempotency-key'] as string | undefined);
      if (seen.length === 1) return request.socket.destroy();
      const chunks: Buffer[] = [];
      for await (const chunk of request) chunks.push(chunk as Buffer);
      const answer = await fetch(`${node!.url}${request.url}`, { method: 'POST', headers: { authorization: request.headers.authorization!, 'content-type': 'application/json', 'idempotency-key': request.headers['idempotency-key'] as string }, body: Buffer.concat(chunks) });
      response.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text());
    });
    await new Promise<void>((resolve) => hop.listen(0, '127.0.0.1', resolve));
    const demo = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'));
    const port = await freePort();
    const crm = await startCrmDemo({
      port,
      // written as an operator might: browsers send it lower-case, without the slash
      publicOrigin: `http://127.0.0.1:${port}/`,
      baseUrl: `http://127.0.0.1:${(hop.address() as { port: number }).port}/api/v1/click2call`,
      siteUrl: demo.site_url,
      gatewayUrl: node!.services.config.gatewayUrl,
      integrationId: demo.integration_id,
      serverKey: demo.server_key,
      users: { agent: demo.agent },
    });
    try {
      const origin = `http://127.0.0.1:${port}`;
      const agent = signedIn(await fetch(`${origin}/`));
      const call = await fetch(`${origin}/click2call/call`, { method: 'POST', headers: { 'content-type': 'application/json', origin, cookie: agent }, body: JSON.stringify({ contact_reference: 'crm-1001', request_id: 'click-lost-0001' }) });
      // the service's own answer (the agent has no call window), not "unreachable"
      expect([call.status, (await call.json()).error]).toEqual([409, 'agent_offline']);
      expect(seen).toHaveLength(2);
      expect(seen[0]).toMatch(/:click-lost-0001$/);
      expect(seen[1]).toBe(seen[0]);
    } finally {
      await crm.close();
      await new Promise((resolve) => hop.close(resolve));
    }
  });

  it('restarts on the same data without losing anything or re-issuing the key', async () => {
    const before = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'));
    const count = async () => ((await node!.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM widget_sessions'))[0]!.n);
    const sessionsBefore = await count();
    expect(sessionsBefore).toBeGreaterThan(0);
    await node!.close();
    expect(existsSync(join(dataDir, 'admin.json'))).toBe(false);
    node = await startNode(config(), { demo: true, logger: false });
    const after = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'));
    expect(after.server_key).toBe(before.server_key);
    expect(await count()).toBe(sessionsBefore);
  });
});

describe('stopping a node of role all', () => {
  it('closes the gateway (its clients told to reconnect elsewhere) before the API finishes its requests', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-stop-'));
    try {
      const node = await startNode(loadConfig({ C2C_DATA_DIR: dataDir, PORT: '0', GATEWAY_PORT: '0', LOG_LEVEL: 'silent' }), { logger: false });
      const order: string[] = [];
      const [gateway, app] = [node.gateway!, node.app!];
      const [closeGateway, closeApp] = [gateway.close.bind(gateway), app.close.bind(app)];
      gateway.close = () => (order.push('gateway'), closeGateway());
      app.close = (() => (order.push('api'), closeApp())) as typeof app.close;
      await node.close();
      expect(order).toEqual(['gateway', 'api']);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

/** The demo CRM's session cookie a page answer set, as a Cookie header. */
function signedIn(response: Response): string {
  const cookie = /crm_session=[^;]+/.exec(response.headers.get('set-cookie') ?? '')?.[0];
  expect(cookie, 'the CRM signs the visitor in').toBeDefined();
  expect(response.headers.get('set-cookie')).toContain('HttpOnly');
  expect(response.headers.get('set-cookie')).toContain('Max-Age=28800');
  return cookie!;
}

describe('the demo CRM, the reference integrator', () => {
  it("passes the service's Retry-After on with a refusal, so the SDK waits as long as the service says", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-crm-'));
    const demoPort = await freePort();
    // every limit a hundredth: the server key's 300 requests a minute become 3
    const node = await startNode(loadConfig({ C2C_DATA_DIR: dataDir, PORT: '0', GATEWAY_PORT: '0', DEMO_PORT: String(demoPort), LOG_LEVEL: 'silent', C2C_RATE_LIMIT_SCALE: '0.01' }), { demo: true, logger: false });
    try {
      const crm = `http://127.0.0.1:${demoPort}`;
      const cookie = signedIn(await fetch(`${crm}/`));
      const call = () => fetch(`${crm}/click2call/call`, { method: 'POST', headers: { 'content-type': 'application/json', origin: crm, cookie }, body: JSON.stringify({ contact_reference: 'crm-1001' }) });
      let refused: Response | undefined;
      for (let attempt = 0; attempt < 10 && !refused; attempt += 1) {
        const answer = await call();
        if (answer.status === 429) refused = answer;
      }
      expect(refused, 'a 429 within 10 calls').toBeDefined();
      expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused!.json()).toMatchObject({ ok: false, error: 'rate_limited' });
    } finally {
      await node.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('configuration', () => {
  it('refuses SIMULATED_ENGINES=refuse with the simulated provider, whose every call window is a simulated engine; takes it with Twilio', () => {
    expect(() => loadConfig({ SIMULATED_ENGINES: 'refuse' })).toThrow(/SIMULATED_ENGINES: refuse needs VOICE_PROVIDER=twilio/);
    expect(loadConfig({ SIMULATED_ENGINES: 'refuse', VOICE_PROVIDER: 'twilio' }).simulatedEngines).toBe('refuse');
    expect(loadConfig({}).simulatedEngines).toBe('allow');
  });

  it('names every bad variable', () => {
    const attempt = () => loadConfig({ PORT: 'abc', DATABASE_URL: 'mysql://x', PUBLIC_BASE_URL: 'https://c2c.example/api' });
    expect(attempt).toThrow(ConfigError);
    try {
      attempt();
    } catch (error) {
      const message = (error as Error).message;
      expect(message).toContain('PORT');
      expect(message).toContain('DATABASE_URL');
      expect(message).toContain('PUBLIC_BASE_URL');
    }
  });

  it('reads ports as decimal digits only, and a blank one as unset', () => {
    expect(loadConfig({ PORT: ' ', GATEWAY_PORT: '', DEMO_PORT: ' 3001 ' })).toMatchObject({ port: 8080, gatewayPort: 8081, demoPort: 3001 });
    expect(loadConfig({ PORT: '0' }).port).toBe(0);
    for (const bad of ['0x1F90', '1e3', '70000', '-1', '80.5', '8080a']) {
      expect(() => loadConfig({ PORT: bad }), bad).toThrow(/PORT.*must be a port number/);
    }
  });

  it('reads every whole-number setting as decimal digits within its bounds, and a blank one as unset', () => {
    expect(loadConfig({ DATABASE_POOL_SIZE: ' 32 ', CALL_RETENTION_DAYS: '3', COMMAND_RETENTION_DAYS: ' ', C2C_MAX_EVENT_LOOP_DELAY_MS: '' })).toMatchObject({
      databasePoolSize: 32,
      callRetentionDays: 3,
      commandRetentionDays: undefined,
      maxEventLoopDelayMs: 0,
    });
    // Number() would take these for 32, 3, 1000 and 0: a typo must not pass as another number
    const refused = [
      ['DATABASE_POOL_SIZE', '0x20'],
      ['CALL_RETENTION_DAYS', '0b11'],
      ['COMMAND_RETENTION_DAYS', '0'],
      ['WIDGET_TOKEN_TTL_SECONDS', '1e3'],
      ['DATABASE_STATEMENT_TIMEOUT_MS', '5000.5'],
      ['TWILIO_TIMEOUT_MS', '-100'],
      ['C2C_SOCKETS_PER_CREDENTIAL', 'many'],
      ['C2C_RATE_LIMIT_SCALE', '0x10'],
      ['C2C_RATE_LIMIT_SCALE', '0'],
    ];
    for (const [name, value] of refused) {
      expect(() => loadConfig({ [name!]: value }), `${name}=${value}`).toThrow(new RegExp(`${name}: must be`));
    }
    expect(loadConfig({ C2C_RATE_LIMIT_SCALE: '0.5' }).rateLimitScale).toBe(0.5);
  });

  it('takes Twilio as the voice provider, with where its REST API is reached and how long a request may take', () => {
    expect(loadConfig({})).toMatchObject({ voiceProvider: 'simulated', twilioApiBaseUrl: undefined, twilioTimeoutMs: 5000 });
    expect(loadConfig({ VOICE_PROVIDER: 'twilio', TWILIO_API_BASE_URL: 'https://egress.example:8443', TWILIO_TIMEOUT_MS: '2500' })).toMatchObject({
      voiceProvider: 'twilio',
      twilioApiBaseUrl: 'https://egress.example:8443',
      twilioTimeoutMs: 2500,
    });
    expect(loopbackWebhookWarning(loadConfig({ VOICE_PROVIDER: 'twilio' }))).toContain('Twilio cannot reach the voice webhook');
    expect(loopbackWebhookWarning(loadConfig({ VOICE_PROVIDER: 'twilio', PUBLIC_BASE_URL: 'https://c2c.example.com' }))).toBeNull();
    expect(loopbackWebhookWarning(loadConfig({}))).toBeNull();
    // The stand-in of the tests is on loopback; anywhere else, the credentials it is sent need https.
    expect(loadConfig({ TWILIO_API_BASE_URL: 'http://127.0.0.1:4010' }).twilioApiBaseUrl).toBe('http://127.0.0.1:4010');
    const refused = [
      ['VOICE_PROVIDER', 'plivo'],
      ['TWILIO_API_BASE_URL', 'api.twilio.com'],
      ['TWILIO_API_BASE_URL', 'http://egress.example'],
      ['TWILIO_API_BASE_URL', 'https://egress.example/twilio'],
      ['TWILIO_TIMEOUT_MS', '0'],
    ];
    for (const [name, value] of refused) {
      expect(() => loadConfig({ [name!]: value }), name).toThrow(new RegExp(name!));
    }
  });

  it('warns of a public service whose gateway address is left at its loopback default, where browsers would only poll', () => {
    expect(loopbackGatewayWarning(loadConfig({ PUBLIC_BASE_URL: 'https://c2c.example.com' }))).toContain('PUBLIC_GATEWAY_URL is not set');
    expect(loopbackGatewayWarning(loadConfig({ PUBLIC_BASE_URL: 'https://c2c.example.com', PUBLIC_GATEWAY_URL: 'https://c2c.example.com' }))).toBeNull();
    expect(loopbackGatewayWarning(loadConfig({}))).toBeNull();
  });

  it('refuses a time limit longer than an hour, which Node would run after 1 ms, naming the variable', () => {
    for (const name of ['DATABASE_STATEMENT_TIMEOUT_MS', 'DATABASE_CONNECT_TIMEOUT_MS', 'C2C_MAX_EVENT_LOOP_DELAY_MS']) {
      expect(() => loadConfig({ [name]: '9999999999' }), name).toThrow(new RegExp(name));
      expect(() => loadConfig({ [name]: '3600000' }), name).not.toThrow();
    }
  });

  it('refuses to run one role of a deployment without the PostgreSQL and Redis its nodes share', async () => {
    for (const role of ['api', 'gateway'] as const) {
      for (const env of [{}, { DATABASE_URL: 'postgres://db.example/c2c' }, { REDIS_URL: 'redis://redis.example:6379' }]) {
        await expect(startNode(loadConfig({ ...env, PORT: '0', GATEWAY_PORT: '0' }), { role, logger: false })).rejects.toThrow(
          new ConfigError(`--role ${role} runs one part of a deployment of several nodes, which share PostgreSQL and Redis: set DATABASE_URL and REDIS_URL (or run --role all, which needs neither).`),
        );
      }
    }
  });

  it('derives the public URLs from the ports by default', () => {
    const config = loadConfig({ PORT: '9000', GATEWAY_PORT: '9001' });
    expect(config.apiBaseUrl).toBe('http://127.0.0.1:9000/api/v1/click2call');
    expect(config.siteUrl).toBe('http://127.0.0.1:9000');
    expect(config.gatewayUrl).toBe('http://127.0.0.1:9001');
  });
});

describe('the URL this machine reaches a listening node at (admin.json, the demo CRM)', () => {
  it('is IPv4 loopback for an address of every interface (:: listens on IPv4 too), else the address itself, IPv6 in brackets', () => {
    expect(localUrl({ address: '0.0.0.0', family: 'IPv4', port: 8080 })).toBe('http://127.0.0.1:8080');
    expect(localUrl({ address: '::', family: 'IPv6', port: 8080 })).toBe('http://127.0.0.1:8080');
    expect(localUrl({ address: '10.1.2.3', family: 'IPv4', port: 8080 })).toBe('http://10.1.2.3:8080');
    expect(localUrl({ address: 'fd00::2', family: 'IPv6', port: 8080 })).toBe('http://[fd00::2]:8080');
  });
});
