/**
 * zod schemas of the resources in spec section 2. Request bodies are strict objects: an unknown
 * field is refused (422 invalid_request) rather than silently ignored.
 */
import { z } from 'zod';
import { ERROR_CODES } from '../errors.js';
import { LIMITS } from '../limits.js';

export const unixSeconds = z.number().int().nonnegative();

export const ErrorSchema = z
  .object({
    ok: z.literal(false),
    error: z.enum(ERROR_CODES as [string, ...string[]]),
    message: z.string(),
  })
  .meta({ id: 'Error' });

export const IdentifierMode = z.enum(['email', 'uuid']);
export type IdentifierMode = z.infer<typeof IdentifierMode>;

export const AgentRef = z
  .strictObject({
    type: IdentifierMode,
    value: z.string().trim().min(1).max(LIMITS.agentValueMaxLength),
  })
  .meta({ id: 'Agent' });
export type AgentRef = z.infer<typeof AgentRef>;

export const NumberVisibility = z.enum(['show', 'hide', 'masked']);
export type NumberVisibility = z.infer<typeof NumberVisibility>;

export const Control = z.enum(['mute', 'dtmf']);
export type Control = z.infer<typeof Control>;

export const WidgetPosition = z.enum(['bottom-right', 'bottom-left', 'top-right', 'top-left']);

/** The widget language meaning "the language of the page the widget is on" (`<html lang>`, else English). */
export const PAGE_LANGUAGE = 'page';

/** The integration's widget defaults, as an operator sets them. */
export const WidgetDefaults = z.strictObject({
  position: WidgetPosition,
  /**
   * A language tag, or `page` (PAGE_LANGUAGE). A string, as in every release of API v1: nodes
   * of an older release check it as one, and serve beside newer ones during an upgrade.
   */
  language: z.string().min(2).max(16),
});
export type WidgetDefaults = z.infer<typeof WidgetDefaults>;

/** The integration setting "Call window opens as" (spec section 1, call window modes). */
export const WindowMode = z.enum(['popup', 'tab', 'frame-shell', 'extension']);
export type WindowMode = z.infer<typeof WindowMode>;

/**
 * Policy.widget: the spec does not show its fields; these are ours (documented): the widget
 * defaults, and how the call window opens unless the SDK's windowMode option says otherwise.
 */
export const PolicyWidget = WidgetDefaults.extend({ window_mode: WindowMode }).meta({ id: 'PolicyWidget' });
export type PolicyWidget = z.infer<typeof PolicyWidget>;

export const Policy = z
  .object({
    outbound: z.boolean(),
    inbound: z.boolean(),
    number_visibility: NumberVisibility,
    controls: z.array(Control),
    widget: PolicyWidget,
    max_call_seconds: z.number().int().positive(),
  })
  .meta({ id: 'Policy' });
export type Policy = z.infer<typeof Policy>;

export const Display = z
  .object({
    name: z.string().nullable(),
    company: z.string().nullable(),
    number: z.string().nullable(),
    contact_reference: z.string().nullable(),
    department: z.string().nullable(),
  })
  .meta({ id: 'Display' });
export type Display = z.infer<typeof Display>;

export const EngineState = z.enum(['enabling', 'ready', 'offline', 'closed']);
export type EngineState = z.infer<typeof EngineState>;

export const EngineClient = z.enum(['window', 'extension']);
export type EngineClient = z.infer<typeof EngineClient>;

export const Engine = z
  .object({
    id: z.string(),
    state: EngineState,
    live: z.boolean(),
    available: z.boolean(),
    mic_ready: z.boolean(),
    busy: z.boolean(),
    muted: z.boolean(),
    simulated: z.boolean(),
    last_seen_ago: z.number().int().nullable(),
    version: z.number().int(),
    client: EngineClient,
  })
  .meta({ id: 'Engine' });
export type Engine = z.infer<typeof Engine>;

export const CALL_STATUSES = [
  'queued',
  'claimed',
  'dialing',
  'ringing',
  'connected',
  'completed',
  'rejected',
  'busy',
  'no_answer',
  'canceled',
  'failed',
  'expired',
  'incoming',
] as const;
export const CallStatus = z.enum(CALL_STATUSES);
export type CallStatus = z.infer<typeof CallStatus>;

export const CallDirection = z.enum(['outbound', 'inbound']);
export type CallDirection = z.infer<typeof CallDirection>;

export const Call = z
  .object({
    ok: z.literal(true).optional(),
    request_id: z.string(),
    call_id: z.string(),
    direction: CallDirection,
    status: CallStatus,
    error: z.string().nullable(),
    display: Display,
    answered_at: unixSeconds.nullable(),
    ended_at: unixSeconds.nullable(),
    duration: z.number().int().nonnegative(),
    expires_at: unixSeconds,
    server_time: unixSeconds,
    orphaned: z.boolean(),
  })
  .meta({ id: 'Call' });
export type Call = z.infer<typeof Call>;

/** Realtime discovery (issue "Real-time gateway"): what socket.io-client needs. */
export const Realtime = z
  .object({
    url: z.string(),
    path: z.string(),
    available: z.boolean(),
  })
  .meta({ id: 'Realtime' });
export type Realtime = z.infer<typeof Realtime>;

export const WidgetAgent = z
  .object({
    name: z.string(),
    identifier: z.string(),
    type: IdentifierMode,
    department: z.string().nullable(),
  })
  .meta({ id: 'WidgetAgent' });
export type WidgetAgent = z.infer<typeof WidgetAgent>;
