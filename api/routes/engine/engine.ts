/**
 * Engine-token endpoints (spec section 4): voice-token, heartbeat, claim, hangup, close, and our answer. Bodies
 * are ours (the spec shows none) and documented in docs/engine-protocol.md.
 */
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { C2CError } from '../../../shared/errors.js';
import {
  Claimed,
  ClaimRequest,
  Closed,
  CloseRequest,
  EngineAnswerRequest,
  EngineAnswerResponse,
  EngineHangupRequest,
  EngineHangupResponse,
  HeartbeatRequest,
  HeartbeatResponse,
  optionalBody,
  VoiceToken,
} from '../../../shared/schemas/engine-api.js';
import { seconds } from '../../clock.js';
import { heartbeatBody } from '../../domain/engines/responses.js';
import { toCall } from '../../domain/views.js';
import { engineOf, useEngineAuth } from '../../http/auth.js';
import { errorResponses } from '../../http/schemas.js';
import { ProviderUnavailable } from '../../providers/index.js';
import type { Services } from '../../services.js';

export const engineRoutes =
  (services: Services): FastifyPluginAsyncZod =>
  async (app) => {
    useEngineAuth(app, services);
    const common = { tags: ['engine'], security: [{ engineToken: [] }] };

    app.post(
      '/engine/voice-token',
      {
        schema: {
          ...common,
          summary: "A voice provider access token for the engine's identity c2c_<engine_id>",
          response: { 200: VoiceToken, ...errorResponses(401, 403, 429, 503) },
        },
      },
      async (request) => {
        try {
          const token = await services.engines.voiceToken(engineOf(request));
          return { ok: true as const, provider: token.provider, token: token.token, identity: token.identity, expires_at: seconds(token.expiresAt) };
        } catch (error) {
          if (error instanceof ProviderUnavailable) {
            // What the operator must fix (an account's missing Twilio key) is said here: refusals are not logged otherwise.
            request.log.warn({ reason: error.message }, 'the voice provider cannot issue a token');
            throw new C2CError('provider_unavailable', undefined, { cause: error });
          }
          throw error;
        }
      },
    );

    app.post(
      '/engine/heartbeat',
      {
        schema: {
          ...common,
          summary: 'State report in; commands, dial requests and the current call out',
          description: 'Send every heartbeat_ms while the socket is up, every heartbeat_fallback_ms while it is down. 90 s without one makes the engine offline.',
          body: HeartbeatRequest,
          response: { 200: HeartbeatResponse, ...errorResponses(401, 403, 422, 429) },
        },
      },
      async (request) => {
        const context = engineOf(request);
        const result = await services.engines.heartbeat(context, request.body, 'rest');
        return heartbeatBody(result, context, services.clock.now());
      },
    );

    app.post(
      '/engine/claim',
      {
        schema: {
          ...common,
          summary: 'Atomically claim a dial request; exactly one engine wins, others get 404',
          body: ClaimRequest,
          response: { 200: Claimed, ...errorResponses(401, 403, 404, 422, 429) },
        },
      },
      async (request) => {
        const claimed = await services.engines.claim(engineOf(request), request.body.request_id);
        return { ok: true as const, call: toCall(claimed.call, services.clock.now()), connect: { params: claimed.params } };
      },
    );

    app.post(
      '/engine/hangup',
      {
        schema: {
          ...common,
          summary: "Hang up from the window: the engine's call (or call_id) ends through the provider",
          body: optionalBody(EngineHangupRequest),
          response: { 200: EngineHangupResponse, ...errorResponses(401, 403, 422, 429, 502) },
        },
      },
      async (request) => {
        const call = await services.engines.hangup(engineOf(request), request.body?.call_id);
        return { ok: true as const, call: call ? toCall(call, services.clock.now()) : null };
      },
    );

    app.post(
      '/engine/answer',
      {
        schema: {
          ...common,
          summary: "Answer from the window: an incoming call ringing on this engine (a real device answers through the provider, which reports it)",
          body: EngineAnswerRequest,
          response: { 200: EngineAnswerResponse, ...errorResponses(401, 403, 409, 422, 429) },
        },
      },
      async (request) => {
        const call = await services.engines.answer(engineOf(request), request.body.call_id);
        return { ok: true as const, call: toCall(call, services.clock.now()) };
      },
    );

    app.post(
      '/engine/close',
      {
        schema: {
          ...common,
          summary: 'The window is closing; its calls are flagged orphaned, not ended',
          body: optionalBody(CloseRequest),
          response: { 200: Closed, ...errorResponses(401, 403, 422, 429) },
        },
      },
      async (request) => {
        await services.engines.close(engineOf(request), request.body?.reason);
        return { ok: true as const, closed: true as const };
      },
    );
  };
