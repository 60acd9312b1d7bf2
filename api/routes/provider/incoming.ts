/**
 * Twilio's incoming webhook: the voice URL of each number an integration takes incoming calls on
 * (`c2c integration numbers`). Signed with the auth token of the account the number's integration
 * belongs to; answered with TwiML that rings the chosen window (<Dial><Client>), or <Reject
 * reason="busy"> when nobody can take the call. The call's progress then comes as status callbacks
 * on the window's leg (webhooks.ts).
 */
import type { FastifyPluginAsync } from 'fastify';
import { C2CError } from '../../../shared/errors.js';
import { engineIdentity } from '../../../shared/prefixes.js';
import { takeTwilioCall } from '../../domain/calls/inbound-twilio.js';
import { incomingNumberOwner } from '../../domain/operator/telephony.js';
import { parseE164 } from '../../domain/phone.js';
import { INBOUND_RING_SECONDS } from '../../providers/provider.js';
import { PROVIDER_PATHS, rejectTwiml, ringClientTwiml, statusCallbackUrl } from '../../providers/twiml.js';
import type { Services } from '../../services.js';
import { acceptForms, formOf, signatureCheck } from './webhook-request.js';

export const incomingRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    acceptForms(app);
    const verify = signatureCheck(services);

    app.post(PROVIDER_PATHS.incoming, { schema: { hide: true } }, async (request, reply) => {
      // Only Twilio brings calls to numbers; the simulator's come through POST /simulated/inbound-calls.
      if (services.config.voiceProvider !== 'twilio') throw new C2CError('not_found', 'Incoming calls to numbers come through Twilio; this service runs VOICE_PROVIDER=simulated.');
      const form = formOf(request);
      if (!form.To || !form.From || !form.CallSid) throw new C2CError('invalid_request', 'To, From and CallSid are required.');
      const number = parseE164(form.To)?.e164;
      const owner = number ? await incomingNumberOwner(services.db, number) : undefined;
      if (!owner) throw new C2CError('not_found', 'No integration takes the incoming calls of this number.');
      await verify(request, owner.account_id, form);
      if (await services.platform.isDisabled()) return reply.type('text/xml').send(rejectTwiml());
      const decision = await takeTwilioCall(services, {
        integrationId: owner.integration_id,
        callSid: form.CallSid,
        // Withheld (Twilio's `anonymous`, `+266696687`) or not a number a call can be shown with: rung all the same, without one.
        from: parseE164(form.From)?.e164 ?? null,
        callerName: form.CallerName || undefined,
      });
      if ('refuse' in decision) {
        request.log.info({ integration: owner.integration_id, reason: decision.refuse }, 'incoming call refused');
        return reply.type('text/xml').send(rejectTwiml('busy'));
      }
      decision.changes?.publish(services.bus);
      const call = decision.ring;
      return reply.type('text/xml').send(
        ringClientTwiml({
          identity: engineIdentity(call.engine_id!),
          intentId: call.id,
          ringSeconds: INBOUND_RING_SECONDS,
          timeLimitSeconds: call.time_limit_seconds!,
          statusCallback: statusCallbackUrl(services.config.publicBaseUrl, call.id),
        }),
      );
    });
  };
