/**
 * Twilio's incoming webhook: the voice URL of each number an integration takes incoming calls on
 * (`c2c integration numbers`). Signed with the auth token of the account the number's integration
 * belongs to; answered with TwiML that rings the chosen window (<Dial><Client>), or <Reject
 * reason="busy"> when nobody can take the call. The call's progress then comes as status callbacks
 * on the window's leg (webhooks.ts). When that ring ends, the <Dial>'s action (ring-ended) rings the
 * next agent if it ended unanswered, or ends the caller's leg (<Hangup>).
 */
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { C2CError } from '../../../shared/errors.js';
import { engineIdentity } from '../../../shared/prefixes.js';
import { passOn, recordRingEnd, takeTwilioCall, type IncomingDecision, type RingEnded } from '../../domain/calls/inbound-twilio.js';
import { incomingNumberOwner } from '../../domain/operator/telephony.js';
import { parseE164 } from '../../domain/phone.js';
import { INBOUND_RING_SECONDS } from '../../providers/provider.js';
import type { CallRow } from '../../domain/views.js';
import { hangupTwiml, PROVIDER_PATHS, rejectTwiml, ringClientTwiml, ringEndedUrl, statusCallbackUrl } from '../../providers/twiml.js';
import type { Services } from '../../services.js';
import { acceptForms, formOf, signatureCheck } from './webhook-request.js';

const DIAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'answered', 'busy', 'no-answer', 'failed', 'canceled']);

export const incomingRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    acceptForms(app);
    const verify = signatureCheck(services);
    /** `called`: the number the caller called, the Device's caller ID (never the caller's: RingPlan.callerId) */
    const ring = (reply: FastifyReply, call: CallRow, called: string) =>
      reply.type('text/xml').send(
        ringClientTwiml({
          identity: engineIdentity(call.engine_id!),
          callerId: called,
          intentId: call.id,
          ringSeconds: INBOUND_RING_SECONDS,
          timeLimitSeconds: call.time_limit_seconds!,
          statusCallback: statusCallbackUrl(services.config.publicBaseUrl, call.id),
          action: ringEndedUrl(services.config.publicBaseUrl, call.id),
        }),
      );
    const publish = (decision: IncomingDecision) => decision.changes?.publish(services.bus);

    app.post(PROVIDER_PATHS.incoming, { schema: { hide: true } }, async (request, reply) => {
      // Only Twilio brings calls to numbers; the simulator's come through POST /simulated/inbound-calls.
      if (services.config.voiceProvider !== 'twilio') throw new C2CError('not_found', 'Incoming calls to numbers come through Twilio; this service runs VOICE_PROVIDER=simulated.');
      const form = formOf(request);
      if (!form.To || !form.From || !form.CallSid) throw new C2CError('invalid_request', 'To, From and CallSid are required.');
      const number = parseE164(form.To)?.e164;
      const owner = number ? await incomingNumberOwner(services.db, number) : undefined;
      if (!number || !owner) throw new C2CError('not_found', 'No integration takes the incoming calls of this number.');
      await verify(request, owner.account_id, form);
      if (await services.platform.isDisabled()) return reply.type('text/xml').send(rejectTwiml());
      const decision = await takeTwilioCall(services, {
        integrationId: owner.integration_id,
        callSid: form.CallSid,
        // Withheld (Twilio's `anonymous`, `+266696687`) or not a number a call can be shown with: rung all the same, without one.
        from: parseE164(form.From)?.e164 ?? null,
        callerName: form.CallerName || undefined,
      });
      publish(decision);
      if ('noRing' in decision) {
        request.log.info({ integration: owner.integration_id, reason: decision.noRing }, 'incoming call refused');
        return reply.type('text/xml').send(rejectTwiml('busy'));
      }
      return ring(reply, decision.ring, number);
    });

    app.post(PROVIDER_PATHS.ringEnded, { schema: { hide: true } }, async (request, reply) => {
      const form = formOf(request);
      const intentId = (request.query as { intent?: string }).intent;
      if (!intentId) throw new C2CError('invalid_request', 'The intent query parameter is required.');
      const [call] = await services.db.query<CallRow>(`SELECT * FROM call_intents WHERE id = $1 AND direction = 'inbound' AND provider = 'twilio'`, [intentId]);
      if (!call) throw new C2CError('not_found', 'No incoming call rang with this intent.');
      await verify(request, call.account_id, form);
      if (!form.CallSid || !DIAL_STATUSES.has(form.DialCallStatus ?? '')) throw new C2CError('invalid_request', 'CallSid and a known DialCallStatus are required.');
      // Twilio sends the caller's leg's To (the number called) with every request: the next ring's caller ID.
      const called = parseE164(form.To ?? '')?.e164;
      if (!called) throw new C2CError('invalid_request', 'To, the number called, is required.');
      if (form.CallSid !== call.provider_call_sid) throw new C2CError('invalid_request', "CallSid is not this call's caller.");
      // The platform switched off meanwhile: the caller's leg ends rather than ring anyone (the ring's own end comes as its status callback).
      if (await services.platform.isDisabled()) return reply.type('text/xml').send(hangupTwiml());
      const ended: RingEnded = {
        callSid: form.CallSid,
        callStatus: form.CallStatus || null,
        dialStatus: form.DialCallStatus as RingEnded['dialStatus'],
        dialCallSid: form.DialCallSid || null,
        dialDurationSeconds: typeof form.DialCallDuration === 'string' && /^\d{1,9}$/.test(form.DialCallDuration) ? Number(form.DialCallDuration) : null,
      };
      // told before the next ring is asked for, which may fail: this ring's end is committed
      (await recordRingEnd(services, call, ended)).publish(services.bus);
      const decision = await passOn(services, call, ended);
      publish(decision);
      if ('ring' in decision) return ring(reply, decision.ring, called);
      request.log.info({ intent: call.id, reason: decision.noRing }, 'incoming call not passed on');
      return reply.type('text/xml').send(hangupTwiml());
    });
  };
