/**
 * What the wallet can still pay for (spec section 8, "call duration": the provider time limit comes
 * from the caps and "the affordable share of the wallet; concurrent calls each plan for their
 * share"). Each live outbound call plans for an equal share of the balance, and a call already
 * dialed has set aside what its time limit can cost: a call not dialed yet plans for the smaller of
 * its share and an equal part of what is not set aside, split among the calls not dialed yet.
 * Without the second bound, a call dialed alone planned on the whole balance and one started beside
 * it on half of it again, so both talking to their limits took the balance below zero. Without the
 * split, calls requested together each counted on all that was not set aside: the first dialed took
 * its share, and the last one was left the remainder, a time limit of seconds, cut off mid-sentence.
 * Inbound calls are not billed and plan for nothing.
 */
import type { Sql } from '../../store/index.js';
import { affordableSeconds } from '../billing.js';
import { LIVE_STATUS_LIST } from './checks.js';

/**
 * Plans a call at `perMinuteMicros` on the account's wallet: the seconds of talk it pays for (0
 * when none). `callId`: the call being dialed (it
 * counts among the live calls and sets nothing aside yet); none for a call not yet created (it is
 * counted in addition). `lock` takes the account row until the transaction ends, so that two dials
 * of one account plan one after the other.
 */
export async function planOnWallet(sql: Sql, accountId: string, perMinuteMicros: number, options: { callId?: string; lock?: boolean } = {}): Promise<number> {
  // The lock first, in a statement of its own: a statement reads the store as it was when it began,
  // so the sums below, read after waiting on the lock in that same statement, would miss what the
  // dial that held it just set aside. NO KEY UPDATE: inserts referencing the account (calls, the
  // ledger) do not wait on it.
  if (options.lock) await sql.query('SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [accountId]);
  const [account] = await sql.query<{ balance_micros: number; live_calls: number; undialed_calls: number; set_aside_micros: number }>(
    `SELECT a.balance_micros,
            (SELECT count(*)::int FROM call_intents c
              WHERE c.account_id = a.id AND c.status IN (${LIVE_STATUS_LIST}) AND c.direction = 'outbound') AS live_calls,
            (SELECT count(*)::int FROM call_intents c
              WHERE c.account_id = a.id AND c.status IN (${LIVE_STATUS_LIST}) AND c.direction = 'outbound'
                AND c.time_limit_seconds IS NULL) AS undialed_calls,
            (SELECT coalesce(sum(ceil(c.time_limit_seconds * c.per_minute_micros / 60.0)), 0)::bigint FROM call_intents c
              WHERE c.account_id = a.id AND c.status IN (${LIVE_STATUS_LIST}) AND c.direction = 'outbound'
                AND c.time_limit_seconds IS NOT NULL AND c.id IS DISTINCT FROM $2) AS set_aside_micros
     FROM accounts a WHERE a.id = $1`,
    [accountId, options.callId ?? null],
  );
  if (!account) return 0;
  // A call not created yet counts in addition; the call being dialed is among both counts already.
  const added = options.callId === undefined ? 1 : 0;
  return affordableSeconds(account.balance_micros, perMinuteMicros, {
    planning: account.live_calls + added,
    undialed: account.undialed_calls + added,
    setAsideMicros: Number(account.set_aside_micros),
  });
}
