/**
 * What the wallet can still pay for (spec section 8, "call duration": the provider time limit comes
 * from the caps and "the affordable share of the wallet; concurrent calls each plan for their
 * share"). Each live paid outbound call plans for an equal share of the balance, and a call already
 * dialed has set aside what its time limit can cost: a call not dialed yet plans for the smaller of
 * its share and an equal part of what is not set aside, split among the calls not dialed yet.
 * Without the second bound, a call dialed alone planned on the whole balance and one started beside
 * it on half of it again, so both talking to their limits took the balance below zero. Without the
 * split, calls requested together each counted on all that was not set aside: the first dialed took
 * its share, and the last one was left the remainder, a time limit of seconds, cut off mid-sentence.
 *
 * A share is money: at a higher rate it buys fewer seconds. So a new call is accepted only if the
 * share every call waiting to be dialed would then have still pays for each one's minimum at its
 * own rate (a call to a dearer country asked for first is not left short by a cheaper one asked for
 * after it). Inbound calls and free destinations cost nothing, and plan for nothing.
 */
import { LIMITS } from '../../../shared/limits.js';
import type { Sql } from '../../store/index.js';
import { affordableSeconds, chargeMicros, timeLimitSeconds } from '../billing.js';
import { LIVE_STATUS_LIST } from './checks.js';

/** The account's wallet as the calls planning on it see it. */
interface Wallet {
  balanceMicros: number;
  /** live paid outbound calls */
  paidLive: number;
  /** what the dialed ones have set aside for their time limits */
  setAsideMicros: number;
  /** what each paid call not dialed yet needs for its minimum (all but the one being dialed) */
  needs: number[];
}

/** The live paid outbound calls of account `a` (read when called: checks.ts, which imports this module, defines the list). */
const paidLive = () => `c.account_id = a.id AND c.status IN (${LIVE_STATUS_LIST}) AND c.direction = 'outbound' AND c.per_minute_micros > 0`;

/** The least a call must be planned for to be placed: a minute, or its policy's cap if lower. */
export function minimumSeconds(policyCap: number): number {
  return Math.min(LIMITS.minAffordableCallSeconds, timeLimitSeconds(policyCap, Number.POSITIVE_INFINITY));
}

async function readWallet(sql: Sql, accountId: string, exceptCallId: string | null): Promise<Wallet | undefined> {
  const [row] = await sql.query<{ balance_micros: number; paid_live: number; set_aside_micros: number | string; needs: Array<number | string> }>(
    `SELECT a.balance_micros,
            (SELECT count(*)::int FROM call_intents c WHERE ${paidLive()}) AS paid_live,
            (SELECT coalesce(sum(ceil(c.time_limit_seconds * c.per_minute_micros / 60.0)), 0)::bigint FROM call_intents c
              WHERE ${paidLive()} AND c.time_limit_seconds IS NOT NULL AND c.id IS DISTINCT FROM $2) AS set_aside_micros,
            (SELECT coalesce(json_agg(ceil(least($3::int, (c.policy->>'max_call_seconds')::int) * c.per_minute_micros / 60.0)), '[]') FROM call_intents c
              WHERE ${paidLive()} AND c.time_limit_seconds IS NULL AND c.id IS DISTINCT FROM $2) AS needs
     FROM accounts a WHERE a.id = $1`,
    [accountId, exceptCallId, LIMITS.minAffordableCallSeconds],
  );
  if (!row) return undefined;
  return { balanceMicros: Number(row.balance_micros), paidLive: row.paid_live, setAsideMicros: Number(row.set_aside_micros), needs: row.needs.map(Number) };
}

/** The money each call not dialed yet plans for, with `planning` and `undialed` calls sharing the wallet. */
function shareMicros(wallet: Wallet, planning: number, undialed: number): number {
  const balance = Math.max(0, wallet.balanceMicros);
  return Math.min(balance / Math.max(1, planning), Math.max(0, balance - wallet.setAsideMicros) / Math.max(1, undialed));
}

/**
 * Whether a new call at `perMinuteMicros` (its policy capping it at `policyCap` seconds) may be
 * accepted: with it counted, its share pays for its minimum, and no call waiting to be dialed whose
 * minimum the wallet paid for without it is left short.
 */
export async function walletAdmits(sql: Sql, accountId: string, perMinuteMicros: number, policyCap: number): Promise<boolean> {
  if (perMinuteMicros <= 0) return true;
  // Locked as a dial locks it (until the request's transaction ends): a dial under way would
  // otherwise set aside what this request counts on, and the call accepted here fail at its own
  // dial. Requests on two integrations of the account see each other the same way.
  await lockWallet(sql, accountId);
  const wallet = await readWallet(sql, accountId, null);
  if (!wallet) return false;
  const before = shareMicros(wallet, wallet.paidLive, wallet.needs.length);
  const after = shareMicros(wallet, wallet.paidLive + 1, wallet.needs.length + 1);
  // calls the wallet already leaves short will fail at their dial whatever happens here: they do not hold this one up
  const kept = wallet.needs.filter((need) => need <= before);
  return Math.max(chargeMicros(minimumSeconds(policyCap), perMinuteMicros), ...kept) <= after;
}

/**
 * Plans the call being dialed at `perMinuteMicros` (its policy capping it at `policyCap` seconds)
 * on the account's wallet: its time limit in seconds. Call it with the account locked (lockWallet),
 * so that two dials of one account plan one after the other.
 */
export async function planDial(sql: Sql, accountId: string, callId: string, perMinuteMicros: number, policyCap: number): Promise<number> {
  if (perMinuteMicros <= 0) return timeLimitSeconds(policyCap, Number.POSITIVE_INFINITY);
  const wallet = await readWallet(sql, accountId, callId);
  if (!wallet) return 0;
  // the call being dialed is live and not dialed yet: among both counts
  const undialed = wallet.needs.length + 1;
  const planned = timeLimitSeconds(policyCap, affordableSeconds(shareMicros(wallet, Math.max(1, wallet.paidLive), undialed), perMinuteMicros));
  // The equal share of the balance can fall below what the call was accepted for (a call billed
  // more than an equal share since): the minimum is still kept when what is not set aside, split
  // among the calls not dialed yet, pays for it, which keeps what is set aside within the balance.
  const free = Math.max(0, Math.max(0, wallet.balanceMicros) - wallet.setAsideMicros) / undialed;
  return Math.max(planned, Math.min(minimumSeconds(policyCap), affordableSeconds(free, perMinuteMicros)));
}

/**
 * Locks the account's wallet until the transaction ends, in a statement of its own: a statement
 * reads the store as it was when it began, so the sums read after waiting on the lock in that same
 * statement would miss what the dial that held it just set aside. NO KEY UPDATE: inserts
 * referencing the account (calls, the ledger) do not wait on it.
 */
export async function lockWallet(sql: Sql, accountId: string): Promise<void> {
  await sql.query('SELECT 1 FROM accounts WHERE id = $1 FOR NO KEY UPDATE', [accountId]);
}
