/**
 * Bodies of the engine endpoints (spec section 4, "Engine endpoints"). The spec shows none of
 * them; these are ours, documented in docs/engine-protocol.md and in the OpenAPI document.
 */
import { z } from 'zod';
import { Call, Display, Engine, EngineClient, Policy, Realtime, WidgetAgent, unixSeconds } from './resources.js';
import { CommandKind } from './widget-api.js';

export const PairRequest = z
  .strictObject({
    ticket: z.string().min(1).max(200),
    simulated: z.boolean().default(false),
    client: EngineClient.default('window'),
    /**
     * A random id the window makes once per ticket and sends with every try: a pairing whose
     * answer was lost, asked again with the same ticket and attempt, gets the same engine under a
     * new token instead of ticket_invalid (engines/pair.ts).
     */
    attempt: z.string().min(16).max(64).optional(),
  })
  .meta({ id: 'PairRequest' });

export const Paired = z
  .object({
    ok: z.literal(true),
    engine_token: z.string(),
    engine: Engine,
    integration_id: z.string(),
    /** the integration's name as the service's operator set it: the call window's consent question names it */
    integration_name: z.string(),
    agent: WidgetAgent,
    policy: Policy,
    voice_provider: z.enum(['simulated', 'twilio']),
    heartbeat_ms: z.number().int(),
    heartbeat_fallback_ms: z.number().int(),
    realtime: Realtime,
  })
  .meta({ id: 'Paired' });

export const VoiceToken = z
  .object({
    ok: z.literal(true),
    provider: z.enum(['simulated', 'twilio']),
    token: z.string(),
    identity: z.string(),
    expires_at: unixSeconds,
  })
  .meta({ id: 'VoiceToken' });

export const CommandAck = z
  .strictObject({
    command_id: z.number().int().positive(),
    result: z.enum(['done', 'failed']),
    error: z.string().max(200).optional(),
  })
  .meta({ id: 'CommandAck' });

/** The engine's state report; `call_id` is the call the engine holds (or rings), or null. */
export const HeartbeatRequest = z
  .strictObject({
    state: z.enum(['enabling', 'ready']),
    mic_ready: z.boolean(),
    available: z.boolean().optional(),
    busy: z.boolean().default(false),
    muted: z.boolean().default(false),
    call_id: z.string().max(64).nullable(),
    acks: z.array(CommandAck).max(100).default([]),
    /**
     * Registered with the voice provider for incoming calls now (a registration that failed, or was
     * lost, is false): only a registered window is rung. Absent from windows of an earlier release,
     * for which fetching a voice token counts as registered.
     */
    registered: z.boolean().optional(),
  })
  .meta({ id: 'HeartbeatRequest' });
export type HeartbeatRequest = z.infer<typeof HeartbeatRequest>;

export const EngineCommand = z
  .object({
    command_id: z.number().int(),
    kind: CommandKind,
    call_id: z.string().nullable(),
    digits: z.string().nullable(),
    available: z.boolean().nullable(),
    ref: z.string().nullable(),
  })
  .meta({ id: 'EngineCommand' });
export type EngineCommand = z.infer<typeof EngineCommand>;

export const DialRequest = z
  .object({
    request_id: z.string(),
    display: Display,
    expires_at: unixSeconds,
  })
  .meta({ id: 'DialRequest' });
export type DialRequest = z.infer<typeof DialRequest>;

export const HeartbeatResponse = z
  .object({
    ok: z.literal(true),
    engine: Engine,
    commands: z.array(EngineCommand),
    dial_requests: z.array(DialRequest),
    call: Call.nullable(),
    heartbeat_ms: z.number().int(),
    server_time: unixSeconds,
    /**
     * The agent's in-call controls now (their policy's `controls`, as WidgetState shows them): an
     * operator's change reaches the window's own Mute without a new pairing. Absent from nodes of
     * an earlier release: the pairing's policy holds.
     */
    controls: Policy.shape.controls.optional(),
    /**
     * Whether the agent's policy allows incoming calls now: the window registers for them, or lets
     * its registration go, without a new pairing. Absent from nodes of an earlier release.
     */
    inbound: Policy.shape.inbound.optional(),
  })
  .meta({ id: 'HeartbeatResponse' });
export type HeartbeatResponse = z.infer<typeof HeartbeatResponse>;

export const ClaimRequest = z.strictObject({ request_id: z.string().min(1).max(64) }).meta({ id: 'ClaimRequest' });

/** What the engine passes to the voice SDK's connect(); the number itself never reaches the browser. */
export const ConnectParams = z
  .object({ To: z.string(), Biz: z.string(), CallerId: z.string() })
  .meta({ id: 'ConnectParams' });

export const Claimed = z
  .object({ ok: z.literal(true), call: Call, connect: z.object({ params: ConnectParams }) })
  .meta({ id: 'Claimed' });

/**
 * A body the client may leave out altogether. Fastify hands a route null for a request with no
 * body and no Content-Type (Content-Length: 0), as for a JSON `null`, and undefined for an empty
 * body labelled JSON (api/http/inputs.ts): each is no body, not a malformed one.
 */
export const optionalBody = <T extends z.ZodType>(schema: T) => schema.nullish();

export const EngineHangupRequest = z.strictObject({ call_id: z.string().max(64).optional() }).meta({ id: 'EngineHangupRequest' });

export const EngineHangupResponse = z.object({ ok: z.literal(true), call: Call.nullable() }).meta({ id: 'EngineHangupResponse' });

export const EngineAnswerRequest = z.strictObject({ call_id: z.string().max(64) }).meta({ id: 'EngineAnswerRequest' });

export const EngineAnswerResponse = z.object({ ok: z.literal(true), call: Call }).meta({ id: 'EngineAnswerResponse' });

export const CloseRequest = z.strictObject({ reason: z.string().max(120).optional() }).meta({ id: 'CloseRequest' });

export const Closed = z.object({ ok: z.literal(true), closed: z.literal(true) }).meta({ id: 'Closed' });
