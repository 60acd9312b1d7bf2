/**
 * Provider webhooks (spec sections 3 and 5, rule 8). The voice webhook consumes a claimed intent
 * once and answers dial instructions; status callbacks move the call forward. Both are verified
 * with Twilio's signature scheme against the account the intent belongs to, over the configured
 * public URL. A voice webhook lacking To, Biz or CallerId is refused before anything else.
 */
import type { FastifyPluginAsync } from 'fastify';
import { C2CError } from '../../../shared/errors.js';
import { consumeForDial } from '../../domain/calls/dial.js';
import { applyProviderEvent } from '../../domain/calls/provider-events.js';
import type { CallRow } from '../../domain/views.js';
import type { ProviderCallStatus } from '../../providers/provider.js';
import { dialTwiml, PROVIDER_PATHS, rejectTwiml, statusCallbackUrl } from '../../providers/twiml.js';
import type { Services } from '../../services.js';
import { acceptForms, formOf, signatureCheck } from './webhook-request.js';

const STATUSES: ReadonlySet<string> = new Set(['queued', 'initiated', 'ringing', 'in-progress', 'completed', 'busy', 'no-answer', 'failed', 'canceled']);

export const webhookRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    acceptForms(app);
    const verify = signatureCheck(services);

    app.post(PROVIDER_PATHS.voice, { schema: { hide: true } }, async (request, reply) => {
      const form = formOf(request);
      if (!form.To || !form.Biz || !form.CallerId) throw new C2CError('invalid_request', 'To, Biz and CallerId are required.');
      await verify(request, form.Biz, form);
      // The provider always sends CallSid; it is what tells a retry from a second use of the intent.
      if (!form.CallSid) throw new C2CError('invalid_request', 'CallSid is required.');
      if (await services.platform.isDisabled()) return reply.type('text/xml').send(rejectTwiml());
      const { decision, changes } = await consumeForDial(services.db, services.clock, {
        callSid: form.CallSid,
        from: form.From ?? '',
        to: form.To,
        biz: form.Biz,
        callerId: form.CallerId,
      });
      changes.publish(services.bus);
      if ('reject' in decision) {
        request.log.warn({ intent: form.To, reason: decision.reject }, 'voice webhook rejected');
        return reply.type('text/xml').send(rejectTwiml());
      }
      const { dial } = decision;
      return reply.type('text/xml').send(
        dialTwiml({
          number: dial.number,
          callerId: dial.callerId,
          timeLimitSeconds: dial.timeLimitSeconds,
          statusCallback: statusCallbackUrl(services.config.publicBaseUrl, dial.intentId),
        }),
      );
    });

    app.post(PROVIDER_PATHS.status, { schema: { hide: true } }, async (request, reply) => {
      const form = formOf(request);
      const intentId = (request.query as { intent?: string }).intent;
      if (!intentId) throw new C2CError('invalid_request', 'The intent query parameter is required.');
      // Read only to find the account whose token signs the callback (it never changes); the
      // status itself is decided from the row locked inside applyProviderEvent's transaction.
      const [call] = await services.db.query<Pick<CallRow, 'account_id'>>('SELECT account_id FROM call_intents WHERE id = $1', [intentId]);
      if (!call) throw new C2CError('not_found');
      await verify(request, call.account_id, form);
      if (!form.CallStatus || !STATUSES.has(form.CallStatus) || !form.CallSid) throw new C2CError('invalid_request', 'CallSid and a known CallStatus are required.');
      const timestamp = form.Timestamp ? Date.parse(form.Timestamp) : Number.NaN;
      const duration = typeof form.CallDuration === 'string' && /^\d{1,9}$/.test(form.CallDuration) ? Number(form.CallDuration) : null;
      const { changes, ignored } = await applyProviderEvent(services.db, services.clock, intentId, {
        callSid: form.CallSid,
        parentCallSid: typeof form.ParentCallSid === 'string' && form.ParentCallSid !== '' ? form.ParentCallSid : null,
        status: form.CallStatus as ProviderCallStatus,
        timestamp: Number.isFinite(timestamp) ? timestamp : null,
        durationSeconds: duration,
      });
      // Answered 204 all the same: the provider would only retry a callback that can never apply.
      if (ignored) request.log.info({ intent: intentId, status: form.CallStatus, reason: ignored }, 'status callback ignored');
      changes.publish(services.bus);
      return reply.code(204).send();
    });
  };

