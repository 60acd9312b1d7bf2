/** Bodies of the widget-token endpoints (spec section 4, "Widget-token endpoints"). */
import { z } from 'zod';
import { LIMITS } from '../limits.js';
import { Call, Engine, Policy, Realtime, WidgetAgent, unixSeconds } from './resources.js';

export const COMMAND_KINDS = [
  'hangup',
  'answer',
  'decline',
  'mute',
  'unmute',
  'dtmf',
  'availability',
  'focus',
] as const;
export const CommandKind = z.enum(COMMAND_KINDS);
export type CommandKind = z.infer<typeof CommandKind>;

/**
 * The newest command of the agent's widgets that its call window reported it could not carry out
 * (the window was asked to answer with no voice device, say). The widget that sent it (it knows
 * its request_id) says so and undoes what it showed, as for a refusal: `commandfailed`.
 */
export const FailedCommand = z
  .object({
    request_id: z.string(),
    kind: CommandKind,
    error: z.literal('command_failed'),
    /** the window's reason, as it gave it */
    message: z.string(),
    failed_at: unixSeconds,
  })
  .meta({ id: 'FailedCommand' });
export type FailedCommand = z.infer<typeof FailedCommand>;

export const WidgetState = z
  .object({
    ok: z.literal(true),
    engine: Engine.nullable(),
    call: Call.nullable(),
    policy: Policy,
    agent: WidgetAgent,
    version: z.number().int(),
    server_time: unixSeconds,
    poll_ms: z.number().int().positive(),
    session_expires_at: unixSeconds,
    realtime: Realtime,
    failed_command: FailedCommand.nullable(),
  })
  .meta({ id: 'WidgetState' });
export type WidgetState = z.infer<typeof WidgetState>;

export const Command = z
  .strictObject({
    kind: CommandKind,
    request_id: z.string().min(1).max(LIMITS.requestIdMaxLength),
    digits: z
      .string()
      .regex(/^[0-9*#w]+$/, 'digits may contain 0-9, * and # (w pauses)')
      .max(LIMITS.dtmfMaxDigits)
      .optional(),
    available: z.boolean().optional(),
    ref: z.string().max(120).optional(),
  })
  .meta({ id: 'Command' });
export type Command = z.infer<typeof Command>;

/**
 * Command status values (the spec does not show them):
 * - queued: accepted and waiting for the call window to carry it out;
 * - delivered: the call window received it;
 * - done: carried out (server-side commands such as hangup and availability are done at once);
 * - failed: the call window could not carry it out.
 */
export const CommandStatus = z.enum(['queued', 'delivered', 'done', 'failed']);
export type CommandStatus = z.infer<typeof CommandStatus>;

export const CommandResult = z
  .object({
    ok: z.literal(true),
    status: CommandStatus,
    command_id: z.number().int(),
  })
  .meta({ id: 'CommandResult' });
export type CommandResult = z.infer<typeof CommandResult>;

export const LaunchTicket = z
  .object({
    ok: z.literal(true),
    ticket: z.string(),
    window_url: z.string(),
    expires_in: z.number().int(),
    window_name: z.string(),
  })
  .meta({ id: 'LaunchTicket' });

export const WidgetRefresh = z
  .object({ ok: z.literal(true), widget_token: z.string(), expires_at: unixSeconds })
  .meta({ id: 'WidgetRefresh' });

/** POST /widget/revoke answers this (the spec does not show the body). */
export const WidgetRevoke = z
  .object({ ok: z.literal(true), revoked: z.literal(true) })
  .meta({ id: 'WidgetRevoke' });
