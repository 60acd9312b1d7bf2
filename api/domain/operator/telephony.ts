/** Operator steps on calling rates, the do-not-call list and the numbers incoming calls arrive on. */
import { parseE164 } from '../phone.js';
import type { Db } from '../../store/index.js';
import { OperatorError, type OperatorDeps } from './accounts.js';
import { assertIntegration } from './integrations.js';

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

/**
 * The numbers whose incoming calls ring an integration's agents (through Twilio), replacing the
 * ones it had; [] takes them all away. A number is one integration's: one another has is refused,
 * naming it, and nothing is changed.
 */
export async function setIncomingNumbers({ db, clock }: OperatorDeps, integrationId: string, numbers: readonly string[]): Promise<string[]> {
  const parsed = numbers.map((number) => {
    const e164 = parseE164(number)?.e164;
    if (!e164) throw new OperatorError(`Not a valid E.164 number: ${number}`);
    return e164;
  });
  const wanted = [...new Set(parsed)].sort();
  // One assignment at a time (an advisory lock): two integrations given a free number together
  // would both pass the check, and the second's insert would be skipped without a word.
  return db.tx(async (sql) => {
    await assertIntegration(sql, integrationId);
    // A number of a revoked integration is free (revocation lets go of them; rows from before it did, too).
    const [taken] = await sql.query<{ number: string; integration_id: string }>(
      `SELECT n.number, n.integration_id FROM incoming_numbers n JOIN integrations i ON i.id = n.integration_id
        WHERE n.number = ANY($1::text[]) AND n.integration_id <> $2 AND i.status <> 'revoked' ORDER BY n.number LIMIT 1`,
      [wanted, integrationId],
    );
    if (taken) throw new OperatorError(`${taken.number} takes the incoming calls of ${taken.integration_id} already.`);
    await sql.query('DELETE FROM incoming_numbers WHERE integration_id = $1 AND NOT (number = ANY($2::text[]))', [integrationId, wanted]);
    await sql.query(
      `INSERT INTO incoming_numbers (number, integration_id, created_at) SELECT unnest($2::text[]), $1, $3
       ON CONFLICT (number) DO UPDATE SET integration_id = EXCLUDED.integration_id, created_at = EXCLUDED.created_at
       WHERE incoming_numbers.integration_id IN (SELECT id FROM integrations WHERE status = 'revoked')`,
      [integrationId, wanted, clock.now()],
    );
    return wanted;
  }, { lock: 'c2c:incoming-numbers' });
}

/** The integration (and its account) whose agents take the incoming calls of this E.164 number, if any. */
export async function incomingNumberOwner(db: Db, number: string): Promise<{ integration_id: string; account_id: string } | undefined> {
  const [owner] = await db.query<{ integration_id: string; account_id: string }>(
    'SELECT n.integration_id, i.account_id FROM incoming_numbers n JOIN integrations i ON i.id = n.integration_id WHERE n.number = $1',
    [number],
  );
  return owner;
}
