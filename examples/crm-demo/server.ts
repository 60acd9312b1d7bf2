/**
 * A reference integrator: the smallest backend and page that embed click-to-call. Read this first
 * if you are integrating. The backend holds the server key and implements the two endpoints the
 * SDK calls (sessionEndpoint, requestCallEndpoint), passing the service's HTTP status and JSON
 * through unchanged. `npm start` runs it on DEMO_PORT.
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { CONTACTS, findContact } from './contacts.js';
import { contactsPage } from './page.js';

export interface CrmDemoOptions {
  port: number;
  /** the service's {base_url}, e.g. http://127.0.0.1:8080/api/v1/click2call */
  baseUrl: string;
  /** the service's {site_url}, where the SDK script is served */
  siteUrl: string;
  /**
   * The service's {base_url} as browsers reach it (PUBLIC_BASE_URL + the API's path), which the
   * page gives the SDK: its default, the script's origin, is not the API's when PUBLIC_SITE_URL
   * differs. Defaults to siteUrl's.
   */
  browserBaseUrl?: string;
  /**
   * Where browsers reach the service's gateway (its PUBLIC_GATEWAY_URL: the sessions' `realtime.url`),
   * which the page's Content-Security-Policy lets the SDK's socket connect to. Set it: the service
   * has no default a CRM could guess (its own is http://127.0.0.1:GATEWAY_PORT), and a policy
   * without it leaves the widget polling. `npm start` passes the service's.
   */
  gatewayUrl: string;
  integrationId: string;
  /** the server key: it stays on this server, never in the page */
  serverKey: string;
  /** who may sign in to the CRM, by name: their agent identifier; ?as= switches between them */
  users: Record<string, { type: 'email' | 'uuid'; value: string }>;
  /**
   * This CRM's origin as browsers see it (https://crm.example.com behind your proxy), the one
   * registered with the integration: requests must come from it, and sessions are made for it.
   * Defaults to http://127.0.0.1:<port>.
   */
  publicOrigin?: string;
}

/** A click's request_id, as the page makes it (crypto.randomUUID()): anything else is refused, not sent as a key. */
const REQUEST_ID = /^[A-Za-z0-9_-]{8,64}$/;
/**
 * How long one attempt at the service may take. POST /calls gets two (a lost answer is asked again
 * with the same Idempotency-Key, which returns the same call): both within the SDK's 30 s wait for
 * requestCallEndpoint, so the page hears why. A session gets one, within the SDK's 10 s wait.
 */
const CALL_ATTEMPT_MS = 12_000;
const SESSION_TIMEOUT_MS = 8_000;

/**
 * The page's Content-Security-Policy, as strict as a careful CRM's, to show that the embed needs
 * no loosening of it (docs/sdk.md, "Content Security Policy"): scripts from this response's nonce
 * and the service's site (the SDK); connections to this CRM (the SDK's two endpoints), the
 * service's API and its gateway (Socket.IO's WebSocket, and HTTP long-polling where that fails);
 * no inline style but the page's own (the widget's is a constructed style sheet); no framing.
 */
function pagePolicy(nonce: string, service: { site: string; api: string; gateway: string }): string {
  const gateway = new URL(service.gateway).origin;
  const connect = ["'self'", new URL(service.api).origin, gateway, gateway.replace(/^http/, 'ws')];
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}' ${new URL(service.site).origin}`,
    `style-src 'nonce-${nonce}'`,
    `connect-src ${[...new Set(connect)].join(' ')}`,
    // the browser's own request for /favicon.ico
    "img-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ');
}

export async function startCrmDemo(options: CrmDemoOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });
  // as browsers send it (lower-case host, no default port, no path): `https://CRM.example.com:443/` is https://crm.example.com
  const publicOrigin = new URL(options.publicOrigin ?? `http://127.0.0.1:${options.port}`).origin;
  // the SDK's default {base_url} is its script's origin
  const apiForBrowsers = options.browserBaseUrl ?? options.siteUrl;

  /**
   * Calls the service with the server key and answers the browser with its status and body,
   * unchanged, and its Retry-After (a 429 or 503 says when to try again; the SDK waits that long).
   */
  const forward = async (reply: FastifyReply, path: string, body: unknown, { headers = {}, timeoutMs = SESSION_TIMEOUT_MS, attempts = 1 } = {}) => {
    let response: Response | undefined;
    let text = '';
    // Only a request that got no answer is sent again (with an Idempotency-Key, so it cannot act twice).
    for (let attempt = 1; !response && attempt <= attempts; attempt += 1) {
      try {
        const answer = await fetch(`${options.baseUrl}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${options.serverKey}`, 'content-type': 'application/json', ...headers },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(timeoutMs),
        });
        // the whole answer, within the same time limit: a reply cut halfway is no answer either
        text = await answer.text();
        response = answer;
      } catch {
        // no answer: try again, or say so below
      }
    }
    if (!response) return reply.code(502).send({ ok: false, error: 'unreachable', message: 'The click-to-call service could not be reached.' });
    const retryAfter = response.headers.get('retry-after');
    if (retryAfter) reply.header('retry-after', retryAfter);
    return reply.code(response.status).type('application/json').send(text);
  };

  // Who is signed in. Your CRM knows from its own session; the demo keeps the user's name in an
  // HttpOnly cookie signed with a key of this process (a page cannot write or forge it), and its
  // page lets you switch with ?as=. Nobody signed in: the SDK's endpoints answer 401 (docs/sdk.md).
  const secret = randomBytes(32);
  const signature = (name: string) => createHmac('sha256', secret).update(name).digest('base64url');
  // Never readable by the page, sent over https only where the CRM is served so, and gone after a working day.
  const cookieFlags = `Path=/; HttpOnly; SameSite=Lax; Max-Age=${8 * 3600}${publicOrigin.startsWith('https:') ? '; Secure' : ''}`;
  const signIn = (reply: FastifyReply, name: string) => reply.header('set-cookie', `crm_session=${name}.${signature(name)}; ${cookieFlags}`);
  const userNamed = (name: string | undefined) => (name !== undefined && Object.hasOwn(options.users, name) ? options.users[name]! : null);
  const userOf = (request: FastifyRequest) => {
    const [, name, mac] = /(?:^|;\s*)crm_session=([a-z_]+)\.([A-Za-z0-9_-]+)/.exec(request.headers.cookie ?? '') ?? [];
    if (!name || !mac) return null;
    const expected = Buffer.from(signature(name));
    const presented = Buffer.from(mac);
    return expected.length === presented.length && timingSafeEqual(expected, presented) ? userNamed(name) : null;
  };
  /**
   * The endpoints act for the signed-in user: only this CRM's own pages may ask (a page of another
   * site would otherwise make the agent's browser ring or call, with the agent's cookie).
   */
  const fromOwnPage = (request: FastifyRequest) => request.headers.origin === publicOrigin;
  const refuse = (reply: FastifyReply, status: 401 | 403, message: string) => reply.code(status).send({ ok: false, error: 'unauthorized', message });
  /** The signed-in user of a request from this CRM's own page, or the refusal already sent. */
  const caller = (request: FastifyRequest, reply: FastifyReply) => {
    if (!fromOwnPage(request)) return void refuse(reply, 403, 'Only the CRM\'s own pages may ask.');
    const user = userOf(request);
    if (!user) return void refuse(reply, 401, 'Sign in to the CRM first.');
    return user;
  };

  app.get('/', async (request, reply) => {
    const as = (request.query as { as?: string }).as;
    // The demo signs a visitor in as the agent; a real CRM would show its login page.
    let name = userNamed(as) ? as! : null;
    let user = name ? userNamed(name) : userOf(request);
    if (!user) {
      name = 'agent';
      user = userNamed(name);
    }
    if (name) signIn(reply, name);
    // a nonce per response, so a script injected into the page cannot guess it
    const nonce = randomBytes(16).toString('base64');
    const policy = pagePolicy(nonce, { site: options.siteUrl, api: apiForBrowsers, gateway: options.gatewayUrl });
    // X-Frame-Options for browsers older than frame-ancestors: no other site may frame the CRM and have the agent click Call in it
    // never stored: a page taken from a cache would come with a nonce already seen
    reply.header('content-security-policy', policy).header('x-frame-options', 'DENY').header('cache-control', 'no-store');
    return reply.type('text/html; charset=utf-8').send(contactsPage({ siteUrl: options.siteUrl, apiBaseUrl: options.browserBaseUrl, integrationId: options.integrationId, user: user!.value, contacts: CONTACTS, users: Object.keys(options.users), nonce }));
  });

  // sessionEndpoint: the SDK posts {integration_id, origin}; we add who the signed-in user is. The
  // session is made for this CRM's own origin, never one the browser names: a token made for
  // another origin would work from another site.
  app.post('/click2call/session', async (request, reply) => {
    const user = caller(request, reply);
    if (!user) return reply;
    const body = (request.body ?? {}) as { origin?: unknown };
    if (body.origin !== undefined && body.origin !== publicOrigin) return refuse(reply, 403, 'Sessions are made for this CRM\'s own origin only.');
    return forward(reply, '/sessions', { integration_id: options.integrationId, agent: user, origin: publicOrigin });
  });

  // requestCallEndpoint: the page names a contact; the number is looked up here, never sent by the browser.
  app.post('/click2call/call', async (request, reply) => {
    const user = caller(request, reply);
    if (!user) return reply;
    const body = (request.body ?? {}) as { contact_reference?: unknown; request_id?: unknown };
    if (body.request_id !== undefined && (typeof body.request_id !== 'string' || !REQUEST_ID.test(body.request_id))) {
      return reply.code(422).send({ ok: false, error: 'invalid_request', message: 'request_id must be 8 to 64 letters, digits, - or _.' });
    }
    const contact = typeof body.contact_reference === 'string' ? findContact(body.contact_reference) : undefined;
    if (!contact) return reply.code(404).send({ ok: false, error: 'not_found', message: 'No such contact.' });
    // One click, one call: a retried request carries the same key and gets the same call back.
    // Keys are per integration: the user's share of it keeps two users' clicks apart.
    const key = `${createHash('sha256').update(user.value).digest('base64url').slice(0, 16)}:${body.request_id ?? randomUUID()}`;
    return forward(
      reply,
      '/calls',
      {
        integration_id: options.integrationId,
        agent: user,
        phone_number: contact.number,
        contact_reference: contact.reference,
        display_name: contact.name,
        display_company: contact.company,
      },
      { headers: { 'idempotency-key': key }, timeoutMs: CALL_ATTEMPT_MS, attempts: 2 },
    );
  });

  // Demo only: ask the simulated provider to ring this agent with an incoming call.
  app.post('/demo/incoming', async (request, reply) => {
    const user = caller(request, reply);
    if (!user) return reply;
    return forward(reply, '/simulated/inbound-calls', {
      integration_id: options.integrationId,
      from: '+442079460999',
      caller_name: 'Pat Caller',
      ...(user.type === 'email' ? { agent: user } : {}),
    });
  });

  await app.listen({ port: options.port, host: '127.0.0.1' });
  return app;
}
