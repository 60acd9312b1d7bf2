/** Operator steps on calling rates and the do-not-call list. */
import { parseE164 } from '../phone.js';
import { OperatorError, type OperatorDeps } from './accounts.js';

/** A rate for numbers starting with prefix ("+44", "+1212"), in micros per minute. */
export async function setRate({ db }: OperatorDeps, prefix: string, perMinuteMicros: number): Promise<void> {
  if (!/^\+\d{0,14}$/.test(prefix)) throw new OperatorError(`A rate prefix is "+" and up to 14 digits: ${prefix}`);
  if (!Number.isInteger(perMinuteMicros) || perMinuteMicros < 0) throw new OperatorError('A rate is a non-negative integer of micros per minute.');
  await db.query(
    `INSERT INTO rates (prefix, per_minute_micros) VALUES ($1, $2)
     ON CONFLICT (prefix) DO UPDATE SET per_minute_micros = EXCLUDED.per_minute_micros`,
    [prefix, perMinuteMicros],
  );
}

/** Adds a number to the do-not-call list of an account, or of the whole platform (accountId null). */
export async function blockNumber({ db, clock }: OperatorDeps, accountId: string | null, number: string): Promise<void> {
  const parsed = parseE164(number);
  if (!parsed) throw new OperatorError(`Not a valid E.164 number: ${number}`);
  if (accountId !== null && (await db.query('SELECT 1 FROM accounts WHERE id = $1', [accountId])).length === 0) throw new OperatorError(`No account ${accountId}.`);
  await db.query(
    `INSERT INTO blocked_numbers (account_id, number, created_at) VALUES ($1, $2, $3)
     ON CONFLICT (coalesce(account_id, ''), number) DO NOTHING`,
    [accountId, parsed.e164, clock.now()],
  );
}

/** Takes a number off the do-not-call list of an account, or of the whole platform; false if it was not on it. */
export async function unblockNumber({ db }: OperatorDeps, accountId: string | null, number: string): Promise<boolean> {
  const parsed = parseE164(number);
  if (!parsed) throw new OperatorError(`Not a valid E.164 number: ${number}`);
  const removed = await db.query(`DELETE FROM blocked_numbers WHERE coalesce(account_id, '') = coalesce($1, '') AND number = $2 RETURNING number`, [accountId, parsed.e164]);
  return removed.length > 0;
}
