/**
 * What every provider webhook shares: form parameters as the only body, and Twilio's signature
 * checked against the account the request concerns, over the configured public URL (never the
 * request's Host header).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { C2CError } from '../../../shared/errors.js';
import { loadProviderAccount } from '../../providers/index.js';
import { verifyWebhook, type WebhookParams } from '../../providers/signature.js';
import type { Services } from '../../services.js';

/** Takes application/x-www-form-urlencoded bodies in this plugin, and refuses any other type saying what is expected. */
export function acceptForms(app: FastifyInstance): void {
  // A body of another type is refused saying what is expected, not with the API's "must be JSON".
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_request, body, done) => {
    done(null, Object.fromEntries(new URLSearchParams(body as string)));
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => {
    if ((body as Buffer).length === 0) return done(null, undefined);
    done(new C2CError('invalid_request', 'Provider webhooks take form parameters (Content-Type: application/x-www-form-urlencoded).'), undefined);
  });
}

/** The request's form parameters; refuses a request without any. */
export function formOf(request: FastifyRequest): WebhookParams {
  const body = request.body;
  if (!body || typeof body !== 'object') throw new C2CError('invalid_request', 'Expected form parameters.');
  return body as WebhookParams;
}

/** Refuses (403 signature_invalid) a webhook not signed with the auth token of this account. */
export function signatureCheck(services: Services) {
  return async (request: FastifyRequest, accountId: string, form: WebhookParams): Promise<void> => {
    const account = await loadProviderAccount(services.db, accountId);
    const url = services.config.publicBaseUrl + request.url;
    const signature = request.headers['x-twilio-signature'];
    if (!account || !verifyWebhook(account.authToken, typeof signature === 'string' ? signature : undefined, url, form)) {
      throw new C2CError('signature_invalid');
    }
  };
}
