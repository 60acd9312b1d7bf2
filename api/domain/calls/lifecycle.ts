/**
 * The call intent state machine (spec section 3): forward-only transitions, ending a call once,
 * and billing it once. Every path that ends a call (provider callback, hangup, expiry, engine
 * offline, revocation) goes through finishCall, so the effects are the same whoever ends it.
 */
import type { CallStatus } from '../../../shared/types.js';
import type { Sql } from '../../store/index.js';
import { chargeMicros } from '../billing.js';
import type { Changes } from '../changes.js';
import { callDurationSeconds, type CallRow } from '../views.js';
import { LIVE_STATUS_LIST } from './checks.js';

/** Progress order; a status never moves to a lower rank, and terminal ones never move. */
export const STATUS_RANK: Record<CallStatus, number> = {
  queued: 0,
  incoming: 1,
  claimed: 1,
  dialing: 2,
  ringing: 3,
  connected: 4,
  completed: 5,
  rejected: 5,
  busy: 5,
  no_answer: 5,
  canceled: 5,
  failed: 5,
  expired: 5,
};

export type EndReason =
  | 'hangup'
  | 'far_end'
  | 'provider'
  | 'expired'
  | 'engine_offline'
  | 'connect_timeout'
  | 'integration_revoked'
  | 'declined'
  | 'time_limit'
  | 'ring_timeout'
  | 'insufficient_balance'
  | 'integration_disabled';

/**
 * Whether an incoming call's ring that ends for this reason passes its caller on to the next agent
 * (Twilio: calls/inbound-twilio.ts): the agent declined (or hung up while it rang), or the window
 * went offline. Any other end the service asks for (the backend's hang up, a revoked or disabled
 * integration) ends the caller's call.
 */
export function passesCallerOn(reason: EndReason): boolean {
  return reason === 'declined' || reason === 'engine_offline';
}

/** How a live call ends when someone hangs up or the service ends it: by whether it was answered. */
export function endStatusFor(call: Pick<CallRow, 'status' | 'answered_at' | 'direction'>, reason: EndReason): CallStatus {
  if (call.answered_at !== null) return 'completed';
  if (reason === 'expired') return 'expired';
  // rang out with no answer (and no final callback from the provider saying so)
  if (reason === 'ring_timeout') return 'no_answer';
  if (call.status === 'incoming') return reason === 'hangup' || reason === 'declined' ? 'rejected' : 'no_answer';
  if (reason === 'engine_offline' || reason === 'connect_timeout') return 'failed';
  return 'canceled';
}

/**
 * How a call the service asked the provider to end ends (calls/hangup.ts), for the hangup's own
 * record and the provider's callback alike (provider-events.ts): by the reason stored with the
 * request (`hangup_reason`: the first asked; none before migration 015, an agent's hang up), so
 * whichever comes first records the same end. An incoming call hung up from the agent's side
 * before it was answered was declined.
 */
export function askedEnd(call: Pick<CallRow, 'status' | 'answered_at' | 'direction' | 'hangup_reason'>, fallback: EndReason = 'hangup'): { status: CallStatus; reason: EndReason } {
  const asked = (call.hangup_reason ?? fallback) as EndReason;
  const reason = asked === 'hangup' && call.status === 'incoming' ? 'declined' : asked;
  return { status: endStatusFor(call, reason), reason };
}

export interface Finish {
  status: CallStatus;
  reason: EndReason;
  error?: string | null;
  /** provider's answer time, when the final callback is the first to carry one */
  answeredAt?: number | null;
  /**
   * The provider's time of the end (a final callback's Timestamp), else the moment of the update:
   * a callback delivered late (queued at the provider, a retry, a node busy) must not bill the
   * delay as talk. Never before the answer.
   */
  endedAt?: number;
  /**
   * End the call only if it is still as the caller saw it when deciding: in this status (and, with
   * `withoutProviderCall`, with no provider call yet). A caller that decided "no provider leg, so no
   * provider hangup" must not end a call the voice webhook has dialed meanwhile; that leg would stay
   * up, unbilled. The reaper, deciding a call rang too long, must not end one answered meanwhile,
   * nor (with `orphaned`) one whose window holds it again.
   */
  onlyIfStill?: { status: CallStatus; withoutProviderCall?: boolean; orphaned?: boolean };
}

/**
 * Ends a live call once (a second attempt finds it ended and returns undefined), bills it when it
 * was an answered outbound call, and bumps the agent's version. A call answered by the time the
 * update runs ends `completed`, whatever status the caller decided on from an earlier read (a
 * hangup racing the answer): it was talked on, and is billed.
 */
export async function finishCall(sql: Sql, changes: Changes, nowMs: number, callId: string, finish: Finish): Promise<CallRow | undefined> {
  const params: unknown[] = [callId, finish.status, finish.reason, finish.error ?? null, finish.endedAt ?? nowMs, finish.answeredAt ?? null];
  let stillAsSeen = '';
  if (finish.onlyIfStill) {
    params.push(finish.onlyIfStill.status);
    stillAsSeen = ` AND status = $${params.length}${finish.onlyIfStill.withoutProviderCall ? ' AND provider_call_sid IS NULL' : ''}${finish.onlyIfStill.orphaned ? ' AND orphaned' : ''}`;
  }
  const [call] = await sql.query<CallRow>(
    `UPDATE call_intents SET status = CASE WHEN coalesce(answered_at, $6) IS NOT NULL THEN 'completed' ELSE $2 END,
       end_reason = $3, error = coalesce($4, error), ended_at = GREATEST($5::bigint, coalesce(answered_at, $6::bigint, $5::bigint)),
       answered_at = coalesce(answered_at, $6), orphaned = false
     WHERE id = $1 AND status IN (${LIVE_STATUS_LIST})${stillAsSeen} RETURNING *`,
    params,
  );
  if (!call) return undefined;
  const billed = call.status === 'completed' ? await bill(sql, call, nowMs) : call;
  await changes.touchAgent(sql, call.integration_id, call.member_id);
  return billed;
}

/**
 * The service ended a call it saw unanswered (a hangup while it rang, say), and the provider then
 * reports it answered and talked on (a final `completed` with a CallDuration): the far end (or, for
 * an incoming call, the agent's window) picked up just before the hangup, and that callback was on
 * its way, or lost. The provider bills that talk, so the call becomes `completed`, with the
 * provider's times, and an outbound one is billed (once: the ledger). Only a call the provider dialed, and not one ended by the provider's own final report
 * of a leg it was not asked to end (end_reason provider or far_end), is revised; a final report
 * after a hangup request is recorded `hangup` too, and would need a second final of the same
 * bound leg with talk time, which the provider does not send. Returns the row when revised.
 */
export async function reviseAsAnswered(sql: Sql, changes: Changes, nowMs: number, callId: string, answeredAt: number, endedAt: number): Promise<CallRow | undefined> {
  const [call] = await sql.query<CallRow>(
    `UPDATE call_intents SET status = 'completed', answered_at = $2::bigint, ended_at = GREATEST($3::bigint, $2::bigint)
     WHERE id = $1 AND answered_at IS NULL AND status NOT IN (${LIVE_STATUS_LIST})
       AND provider_call_sid IS NOT NULL AND end_reason NOT IN ('provider', 'far_end') RETURNING *`,
    [callId, answeredAt, endedAt],
  );
  if (!call) return undefined;
  const billed = await bill(sql, call, nowMs);
  await changes.touchAgent(sql, call.integration_id, call.member_id);
  return billed;
}

/**
 * Debits the wallet once per call: the ledger's unique call_id makes a second debit impossible.
 * Never for more than the provider time limit: the provider ends the call there, so talk past it
 * is only a final callback that came late or never (the reaper's time-limit rule, a late hangup),
 * and the limit is what the wallet was checked to afford.
 */
async function bill(sql: Sql, call: CallRow, nowMs: number): Promise<CallRow> {
  if (call.direction !== 'outbound' || call.answered_at === null) return call;
  const talkSeconds = callDurationSeconds(call, nowMs);
  const billedSeconds = call.time_limit_seconds === null ? talkSeconds : Math.min(talkSeconds, call.time_limit_seconds);
  const amount = chargeMicros(billedSeconds, call.per_minute_micros);
  const inserted = await sql.query(
    `INSERT INTO wallet_ledger (account_id, call_id, amount_micros, reason, created_at) VALUES ($1, $2, $3, 'call', $4)
     ON CONFLICT (call_id) DO NOTHING RETURNING id`,
    [call.account_id, call.id, -amount, nowMs],
  );
  if (inserted.length === 0) return call;
  await sql.query('UPDATE accounts SET balance_micros = balance_micros - $2 WHERE id = $1', [call.account_id, amount]);
  const [updated] = await sql.query<CallRow>('UPDATE call_intents SET charge_micros = $2 WHERE id = $1 RETURNING *', [call.id, amount]);
  return updated!;
}

/** Moves a live call forward (never back); returns the row when it moved. */
export async function advanceCall(
  sql: Sql,
  changes: Changes,
  callId: string,
  to: CallStatus,
  set: Record<string, unknown> = {},
): Promise<CallRow | undefined> {
  const lower = (Object.keys(STATUS_RANK) as CallStatus[]).filter((status) => STATUS_RANK[status] < STATUS_RANK[to]);
  const columns = Object.keys(set);
  const assignments = columns.map((column, index) => `, ${column} = $${index + 3}`).join('');
  const [call] = await sql.query<CallRow>(
    `UPDATE call_intents SET status = $2${assignments} WHERE id = $1 AND status = ANY($${columns.length + 3}) RETURNING *`,
    [callId, to, ...Object.values(set), lower],
  );
  if (call) await changes.touchAgent(sql, call.integration_id, call.member_id);
  return call;
}
