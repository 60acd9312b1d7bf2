/** Bodies of the server-key endpoints (spec section 4, "Server-key endpoints"). */
import { z } from 'zod';
import { LIMITS } from '../limits.js';
import { parseOrigin } from '../origin.js';
import { AgentRef, Engine, Policy, Realtime, WidgetAgent, unixSeconds } from './resources.js';

const encoder = new TextEncoder();
const utf8Length = (text: string): number => encoder.encode(text).length;

const displayField = z.string().max(LIMITS.displayFieldMaxLength);

export const Metadata = z
  .record(z.string(), z.unknown())
  .refine((value) => utf8Length(JSON.stringify(value)) <= LIMITS.metadataMaxBytes, {
    message: `metadata must be at most ${LIMITS.metadataMaxBytes} bytes serialized`,
  });

export const SessionRequest = z
  .strictObject({
    integration_id: z.string().min(1).max(64),
    agent: AgentRef,
    origin: z
      .string()
      .max(LIMITS.originMaxLength)
      .refine((value) => parseOrigin(value) !== null, {
        message: 'origin must be a bare origin (scheme://host[:port]), not a URL with a path',
      }),
  })
  .meta({ id: 'SessionRequest' });
export type SessionRequest = z.infer<typeof SessionRequest>;

export const Session = z
  .object({
    ok: z.literal(true),
    widget_token: z.string(),
    expires_at: unixSeconds,
    agent: WidgetAgent,
    policy: Policy,
    engine: Engine.nullable(),
    realtime: Realtime,
  })
  .meta({ id: 'Session' });
export type Session = z.infer<typeof Session>;

export const CallRequest = z
  .strictObject({
    integration_id: z.string().min(1).max(64),
    agent: AgentRef,
    phone_number: z.string().max(32),
    contact_reference: displayField.optional(),
    display_name: displayField.optional(),
    display_company: displayField.optional(),
    metadata: Metadata.optional(),
  })
  .meta({ id: 'CallRequest' });
export type CallRequest = z.infer<typeof CallRequest>;

export const IdempotencyHeaders = z.object({
  'idempotency-key': z.string().min(1).max(LIMITS.idempotencyKeyMaxLength).optional(),
});

/**
 * A call's id as the path gives it. No shape is checked beyond the router's own bound (fastify's
 * maxParamLength, 100): an id that names no call of the integration is 404, whatever it looks like
 * (spec: GET /calls/{id} answers 200 or 404), never 422. The empty one too (GET /calls/): no
 * minimum length.
 */
export const CallIdParams = z.object({ id: z.string().max(100) });
