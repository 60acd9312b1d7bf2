/**
 * Row → resource projections (spec section 2). The only place a stored call becomes a Call: the
 * number passes through the frozen policy's visibility here, so a hidden number cannot leak
 * through any endpoint, push or engine message.
 */
import type { Call, CallStatus, Engine, Policy, WidgetAgent } from '../../shared/types.js';
import { seconds } from '../clock.js';
import type { ResolvedAgent } from './agents.js';
import type { IntegrationRow } from './integrations/model.js';
import { displayNumber } from './phone.js';

export interface EngineRow {
  id: string;
  integration_id: string;
  member_id: string;
  client: 'window' | 'extension';
  simulated: boolean;
  state: Engine['state'];
  mic_ready: boolean;
  available: boolean;
  busy: boolean;
  muted: boolean;
  version: number;
  created_at: number;
  last_seen_at: number;
  closed_at: number | null;
  registered: boolean;
}

/**
 * Rows as JSON, for statements that return several tables' rows at once. The bytea columns are
 * left out: JSON would turn them into hex text, and no reader of such rows needs them.
 */
export const callJson = (alias: string) => `(to_jsonb(${alias}) - 'request_hash')`;
export const engineJson = (alias: string) => `(to_jsonb(${alias}) - 'secret_hash')`;

export interface CallRow {
  id: string;
  integration_id: string;
  account_id: string;
  member_id: string;
  direction: 'outbound' | 'inbound';
  status: CallStatus;
  error: string | null;
  /** null: an incoming call whose caller withheld the number */
  phone_number: string | null;
  display_name: string | null;
  display_company: string | null;
  contact_reference: string | null;
  department: string | null;
  metadata: Record<string, unknown> | null;
  policy: Policy;
  caller_id: string | null;
  per_minute_micros: number;
  time_limit_seconds: number | null;
  idempotency_key: string | null;
  request_hash: Uint8Array | null;
  engine_id: string | null;
  provider_call_sid: string | null;
  provider_leg_sid: string | null;
  /** 1, or which agent in turn an incoming call rings on the caller's leg (calls/inbound-twilio.ts) */
  ring_attempt: number;
  orphaned: boolean;
  /** when its window let go of it (orphaned); null while held, and for calls orphaned before migration 020 */
  orphaned_at: number | null;
  /** when a node last read the provider's record of it (reaper.ts) */
  provider_read_at: number | null;
  created_at: number;
  expires_at: number;
  claimed_at: number | null;
  dialing_at: number | null;
  ringing_at: number | null;
  answered_at: number | null;
  ended_at: number | null;
  hangup_requested_at: number | null;
  /** why the service asked the provider to end the call (calls/hangup.ts); null before migration 015: an agent's hang up */
  hangup_reason: string | null;
  end_reason: string | null;
  charge_micros: number | null;
  provider: 'simulated' | 'twilio';
}

export const TERMINAL_STATUSES: readonly CallStatus[] = ['completed', 'rejected', 'busy', 'no_answer', 'canceled', 'failed', 'expired'];

export function isTerminal(status: CallStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** Seconds of talk, from the provider's answer to the end (or to now while connected). */
export function callDurationSeconds(call: Pick<CallRow, 'answered_at' | 'ended_at'>, nowMs: number): number {
  if (call.answered_at === null) return 0;
  const end = call.ended_at ?? nowMs;
  return Math.max(0, seconds(end) - seconds(call.answered_at));
}

export function toCall(call: CallRow, nowMs: number): Call {
  return {
    request_id: call.id,
    call_id: call.id,
    direction: call.direction,
    status: call.status,
    error: call.error,
    display: {
      name: call.display_name,
      company: call.display_company,
      number: displayNumber(call.phone_number, call.policy.number_visibility),
      contact_reference: call.contact_reference,
      department: call.department,
    },
    answered_at: call.answered_at === null ? null : seconds(call.answered_at),
    ended_at: call.ended_at === null ? null : seconds(call.ended_at),
    duration: callDurationSeconds(call, nowMs),
    expires_at: seconds(call.expires_at),
    server_time: seconds(nowMs),
    orphaned: call.orphaned,
  };
}

/**
 * `last_seen_ago` is null while the window is live (heard within the last 90 s: `live` says so).
 * The rows WidgetStates are made of are cached per agent until its version changes, and a
 * heartbeat moves `last_seen_at` without a new version (it would push every widget every 15 s):
 * from a cached row the figure would grow with the cache's age, not the window's silence. Once the
 * window is offline or closed, it is no longer heard and its row's time is its last.
 */
export function toEngine(engine: EngineRow, nowMs: number): Engine {
  const live = engine.state === 'enabling' || engine.state === 'ready';
  return {
    id: engine.id,
    state: engine.state,
    live,
    available: engine.available,
    mic_ready: engine.mic_ready,
    busy: engine.busy,
    muted: engine.muted,
    simulated: engine.simulated,
    last_seen_ago: live ? null : Math.max(0, seconds(nowMs) - seconds(engine.last_seen_at)),
    version: engine.version,
    client: engine.client,
  };
}

export function toWidgetAgent(integration: IntegrationRow, agent: ResolvedAgent): WidgetAgent {
  return {
    name: agent.member.name,
    identifier: agent.identifier,
    type: integration.identifier_mode,
    department: agent.member.department_name,
  };
}
