/**
 * A reference integrator: the smallest backend and page that embed click-to-call. Read this first
 * if you are integrating. The backend holds the server key and implements the two endpoints the
 * SDK calls (sessionEndpoint, requestCallEndpoint), passing the service's HTTP status and JSON
 * through unchanged. `npm start` runs it on DEMO_PORT.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import { randomUUID } from 'node:crypto';
import { CONTACTS, findContact } from './contacts.js';
import { contactsPage } from './page.js';

export interface CrmDemoOptions {
  port: number;
  /** the service's {base_url}, e.g. http://127.0.0.1:8080/api/v1/click2call */
  baseUrl: string;
  /** the service's {site_url}, where the SDK script is served */
  siteUrl: string;
  integrationId: string;
  /** the server key: it stays on this server, never in the page */
  serverKey: string;
  /** who is "logged in" to the CRM, by agent identifier; ?as= switches between them */
  users: Record<string, { type: 'email' | 'uuid'; value: string }>;
}

export async function startCrmDemo(options: CrmDemoOptions): Promise<FastifyInstance> {
  const app = Fastify({ logger: false });

  /**
   * Calls the service with the server key and answers the browser with its status and body,
   * unchanged, and its Retry-After (a 429 or 503 says when to try again; the SDK waits that long).
   */
  const forward = async (reply: import('fastify').FastifyReply, path: string, body: unknown, headers: Record<string, string> = {}) => {
    try {
      const response = await fetch(`${options.baseUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${options.serverKey}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
      const retryAfter = response.headers.get('retry-after');
      if (retryAfter) reply.header('retry-after', retryAfter);
      return reply.code(response.status).type('application/json').send(await response.text());
    } catch {
      return reply.code(502).send({ ok: false, error: 'unreachable', message: 'The click-to-call service could not be reached.' });
    }
  };

  // Your real CRM knows who is logged in from its own session; the demo lets you switch with ?as=.
  const userOf = (cookie: string | undefined) => {
    const name = /(?:^|;\s*)crm_user=([a-z_]+)/.exec(cookie ?? '')?.[1] ?? 'agent';
    return options.users[name] ?? options.users.agent!;
  };

  app.get('/', async (request, reply) => {
    const as = (request.query as { as?: string }).as;
    if (as && options.users[as]) reply.header('set-cookie', `crm_user=${as}; Path=/; SameSite=Lax`);
    const user = as && options.users[as] ? options.users[as]! : userOf(request.headers.cookie);
    return reply.type('text/html; charset=utf-8').send(contactsPage({ siteUrl: options.siteUrl, integrationId: options.integrationId, user: user.value, contacts: CONTACTS, users: Object.keys(options.users) }));
  });

  // sessionEndpoint: the SDK posts {integration_id, origin}; we add who the logged-in user is.
  app.post('/click2call/session', async (request, reply) => {
    const body = (request.body ?? {}) as { origin?: string };
    return forward(reply, '/sessions', { integration_id: options.integrationId, agent: userOf(request.headers.cookie), origin: body.origin });
  });

  // requestCallEndpoint: the page names a contact; the number is looked up here, never sent by the browser.
  app.post('/click2call/call', async (request, reply) => {
    const body = (request.body ?? {}) as { contact_reference?: string; request_id?: string };
    const contact = findContact(body.contact_reference);
    if (!contact) return reply.code(404).send({ ok: false, error: 'not_found', message: 'No such contact.' });
    return forward(
      reply,
      '/calls',
      {
        integration_id: options.integrationId,
        agent: userOf(request.headers.cookie),
        phone_number: contact.number,
        contact_reference: contact.reference,
        display_name: contact.name,
        display_company: contact.company,
      },
      // One click, one call: a retried request carries the same key and gets the same call back.
      { 'idempotency-key': body.request_id ?? randomUUID() },
    );
  });

  // Demo only: ask the simulated provider to ring this agent with an incoming call.
  app.post('/demo/incoming', async (request, reply) => {
    const user = userOf(request.headers.cookie);
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
