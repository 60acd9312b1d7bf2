/**
 * Operator steps on accounts, departments and members (spec section 1). The web console will call
 * these; until it exists the `c2c` CLI does.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { ID_PREFIX } from '../../../shared/prefixes.js';
import type { Bus } from '../../bus/index.js';
import type { Clock } from '../../clock.js';
import type { Db, Sql } from '../../store/index.js';
import { isUniqueViolation } from '../../store/index.js';
import { newId } from '../credentials.js';
import { agentVersionBump } from '../agent-state.js';

export interface OperatorDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
}

export class OperatorError extends Error {}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** A name people will read in widgets and lists: some text, trimmed. */
export function assertName(what: string, name: string): string {
  const trimmed = name.trim();
  if (trimmed === '' || trimmed.length > 200) throw new OperatorError(`A ${what} needs a name (1 to 200 characters).`);
  return trimmed;
}

/** Whether a foreign-key check refused a row: the id it names does not exist. */
const isForeignKeyViolation = (error: unknown) => (error as { code?: unknown } | null)?.code === '23503';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface AccountRecord {
  id: string;
  kind: 'personal' | 'business';
  name: string;
  status: 'active' | 'suspended';
  balance_micros: number;
  currency: string;
  provider_account_sid: string;
  /** the Twilio API key windows' tokens are signed with (never its secret); null until set */
  provider_api_key_sid: string | null;
  provider_twiml_app_sid: string | null;
}

export async function createAccount(
  { db, clock }: OperatorDeps,
  input: { id?: string; kind: 'personal' | 'business'; name: string; balanceMicros?: number; currency?: string },
): Promise<AccountRecord> {
  const opening = input.balanceMicros ?? 0;
  if (!Number.isSafeInteger(opening) || opening < 0) throw new OperatorError('An opening balance cannot be negative.');
  const name = assertName('account', input.name);
  // The opening balance is the account's first top-up, in the ledger as every later one is: the
  // ledger's sum is the balance.
  return db.tx(async (sql) => {
    const [row] = await sql.query<AccountRecord>(
      `INSERT INTO accounts (id, kind, name, balance_micros, currency, provider_account_sid, provider_auth_token, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       RETURNING id, kind, name, status, balance_micros, currency, provider_account_sid, provider_api_key_sid, provider_twiml_app_sid`,
      [
        input.id ?? newId(ID_PREFIX.account),
        input.kind,
        name,
        opening,
        input.currency ?? 'USD',
        // Simulated provider credentials; `c2c account set-provider` replaces them with Twilio's.
        `AC${randomBytes(16).toString('hex')}`,
        randomBytes(16).toString('hex'),
        clock.now(),
      ],
    );
    if (opening > 0) {
      await sql.query('INSERT INTO wallet_ledger (account_id, amount_micros, reason, created_at) VALUES ($1, $2, $3, $4)', [row!.id, opening, 'top-up', clock.now()]);
    }
    return row!;
  });
}

/** An account's Twilio credentials, as `c2c account set-provider` gives them. */
export interface ProviderCredentials {
  accountSid: string;
  authToken: string;
  /** signs the call windows' access tokens (needed with VOICE_PROVIDER=twilio); undefined keeps the account's, if the Account SID stays */
  apiKey?: { sid: string; secret: string } | undefined;
  /** the TwiML App whose voice URL is this service's voice webhook (needed with VOICE_PROVIDER=twilio); undefined as apiKey */
  twimlAppSid?: string | undefined;
}

/**
 * Sets an account's Twilio credentials; answers whether an API key or TwiML App it had was emptied
 * (the Account SID changed and none was given), which leaves its windows on Twilio without tokens.
 */
export async function setAccountProvider({ db }: OperatorDeps, accountId: string, credentials: ProviderCredentials): Promise<{ emptied: boolean }> {
  const { authToken, apiKey } = credentials;
  // Twilio's forms: a mistyped or truncated one would make every webhook fail its signature check,
  // or every window's token be refused. A refusal never repeats what was given: a secret pasted
  // into the wrong flag would be printed.
  if (!/^AC[0-9a-f]{32}$/i.test(credentials.accountSid)) throw new OperatorError(`Not a Twilio Account SID (AC and 32 hexadecimal digits): ${described(credentials.accountSid)}`);
  if (!/^[0-9a-f]{32}$/i.test(authToken)) throw new OperatorError('Not a Twilio auth token (32 hexadecimal digits).');
  if (apiKey && !/^SK[0-9a-f]{32}$/i.test(apiKey.sid)) throw new OperatorError(`Not a Twilio API key SID (SK and 32 hexadecimal digits): ${described(apiKey.sid)}`);
  if (apiKey && !/^[0-9a-z]{32}$/i.test(apiKey.secret)) throw new OperatorError('Not a Twilio API key secret (32 letters and digits).');
  if (credentials.twimlAppSid !== undefined && !/^AP[0-9a-f]{32}$/i.test(credentials.twimlAppSid)) {
    throw new OperatorError(`Not a Twilio TwiML App SID (AP and 32 hexadecimal digits): ${described(credentials.twimlAppSid)}`);
  }
  // SIDs as Twilio writes them (lower-case hexadecimal), so the same one typed in capitals is the same
  const accountSid = sidOf(credentials.accountSid);
  const twimlAppSid = credentials.twimlAppSid === undefined ? null : sidOf(credentials.twimlAppSid);
  return db.tx(async (sql) => {
    const [before] = await sql.query<{ sid: string; key: string | null; app: string | null }>(
      'SELECT provider_account_sid AS sid, provider_api_key_sid AS key, provider_twiml_app_sid AS app FROM accounts WHERE id = $1 FOR UPDATE',
      [accountId],
    );
    if (!before) throw new OperatorError(`No account ${accountId}.`);
    // The API key and app are kept when not given and the Twilio account stays the same (a rotated
    // auth token), and emptied when it changes: another account's would sign tokens Twilio refuses.
    const kept = before.sid.toLowerCase() === accountSid.toLowerCase();
    await sql.query(
      `UPDATE accounts SET provider_account_sid = $2, provider_auth_token = $3,
         provider_api_key_sid = CASE WHEN $4::text IS NOT NULL THEN $4 WHEN $7::boolean THEN provider_api_key_sid END,
         provider_api_key_secret = CASE WHEN $4::text IS NOT NULL THEN $5 WHEN $7::boolean THEN provider_api_key_secret END,
         provider_twiml_app_sid = CASE WHEN $6::text IS NOT NULL THEN $6 WHEN $7::boolean THEN provider_twiml_app_sid END
       WHERE id = $1`,
      [accountId, accountSid, authToken, apiKey ? sidOf(apiKey.sid) : null, apiKey?.secret ?? null, twimlAppSid, kept],
    );
    return { emptied: !kept && ((before.key !== null && !apiKey) || (before.app !== null && twimlAppSid === null)) };
  });
}

/** A SID as Twilio writes it: its two-letter prefix in capitals, its hexadecimal digits in lower case. */
const sidOf = (sid: string) => sid.slice(0, 2).toUpperCase() + sid.slice(2).toLowerCase();

/** A value given for a SID, described without repeating it: its first two characters and its length. */
const described = (value: string) => `"${value.slice(0, 2)}…" (${value.length} characters)`;

export async function fundAccount({ db, clock }: OperatorDeps, accountId: string, amountMicros: number): Promise<number> {
  // A top-up adds money; nothing here takes it away (a call's debit is billing's, with its ledger reason).
  if (!Number.isSafeInteger(amountMicros) || amountMicros <= 0) throw new OperatorError('A top-up must be a positive amount.');
  return db.tx(async (sql) => {
    const [row] = await sql.query<{ balance_micros: number }>(
      'UPDATE accounts SET balance_micros = balance_micros + $2 WHERE id = $1 RETURNING balance_micros',
      [accountId, amountMicros],
    );
    if (!row) throw new OperatorError(`No account ${accountId}.`);
    await sql.query('INSERT INTO wallet_ledger (account_id, amount_micros, reason, created_at) VALUES ($1, $2, $3, $4)', [
      accountId,
      amountMicros,
      'top-up',
      clock.now(),
    ]);
    return row.balance_micros;
  });
}

/**
 * The change and the read of what to announce are one statement: stored apart, a change whose
 * read then failed (a statement timeout) would be in the store but never announced, and every
 * node would go on serving the account's integrations from its caches.
 */
export async function setAccountStatus({ db, bus }: OperatorDeps, accountId: string, status: 'active' | 'suspended'): Promise<void> {
  const rows = await db.query<{ integration_id: string | null }>(
    `WITH account AS (UPDATE accounts SET status = $2 WHERE id = $1 RETURNING id)
     SELECT i.id AS integration_id FROM account LEFT JOIN integrations i ON i.account_id = account.id`,
    [accountId, status],
  );
  if (rows.length === 0) throw new OperatorError(`No account ${accountId}.`);
  for (const { integration_id: integrationId } of rows) if (integrationId) bus.publish({ type: 'integration', integrationId });
}

export async function createDepartment({ db, clock }: OperatorDeps, accountId: string, name: string, id?: string): Promise<{ id: string; name: string }> {
  const named = assertName('department', name);
  try {
    const [row] = await db.query<{ id: string; name: string }>(
      'INSERT INTO departments (id, account_id, name, created_at) VALUES ($1, $2, $3, $4) RETURNING id, name',
      [id ?? newId(ID_PREFIX.department), accountId, named, clock.now()],
    );
    return row!;
  } catch (error) {
    if (isUniqueViolation(error)) {
      // named with its id: an operator whose first answer was lost can go on with it
      const [existing] = await db.query<{ id: string }>('SELECT id FROM departments WHERE account_id = $1 AND name = $2', [accountId, named]);
      throw new OperatorError(`Account ${accountId} has a department named ${JSON.stringify(named)} already${existing ? `: ${existing.id}` : ''}.`);
    }
    if (isForeignKeyViolation(error)) throw new OperatorError(`No account ${accountId}.`);
    throw error;
  }
}

export interface MemberRecord {
  id: string;
  account_id: string;
  email: string;
  uuid: string;
  name: string;
  enabled: boolean;
  department_id: string | null;
}

/** A member's department is one of its own account's (another's would show that account's name in widgets). */
async function assertDepartmentOfAccount(sql: Sql, accountId: string, departmentId: string | null | undefined): Promise<void> {
  if (!departmentId) return;
  const [row] = await sql.query('SELECT 1 FROM departments WHERE id = $1 AND account_id = $2', [departmentId, accountId]);
  if (!row) throw new OperatorError(`No department ${departmentId} in account ${accountId}.`);
}

/**
 * Locks an account for a change to who its members are known as (e-mails, UUIDs). NO KEY UPDATE:
 * rows that reference the account (a call, a member) are still inserted meanwhile.
 */
export const ACCOUNT_LOCK = 'SELECT kind FROM accounts WHERE id = $1 FOR NO KEY UPDATE';

export async function createMember(
  { db, clock }: OperatorDeps,
  input: { id?: string; accountId: string; email: string; name: string; uuid?: string; departmentId?: string | null; enabled?: boolean },
): Promise<MemberRecord> {
  if (!EMAIL.test(input.email)) throw new OperatorError(`Not an e-mail address: ${input.email}`);
  if (input.uuid !== undefined && !UUID.test(input.uuid)) throw new OperatorError(`Not a UUID: ${input.uuid}`);
  const name = assertName('member', input.name);
  const uuid = (input.uuid ?? randomUUID()).toLowerCase();
  try {
    return await db.tx(async (sql) => {
      // The account locked (as a UUID mapping locks it): two members created at once would each pass the checks below.
      const [account] = await sql.query<{ kind: string }>(ACCOUNT_LOCK, [input.accountId]);
      if (!account) throw new OperatorError(`No account ${input.accountId}.`);
      if (account.kind === 'personal') {
        const [others] = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM members WHERE account_id = $1 AND NOT removed', [input.accountId]);
        if (others!.n > 0) throw new OperatorError('A personal account has exactly one member.');
      }
      await assertDepartmentOfAccount(sql, input.accountId, input.departmentId);
      // Sessions find a member by e-mail without regard to case: two differing only in case would make both agent_ambiguous.
      const [sameEmail] = await sql.query<{ id: string }>('SELECT id FROM members WHERE account_id = $1 AND lower(email) = lower($2)', [input.accountId, input.email]);
      if (sameEmail) throw new OperatorError(`Member ${sameEmail.id} has this e-mail already (e-mails are compared without regard to case).`);
      // In uuid mode a session's UUID finds a member by its stable UUID or an integration's mapping: one already mapped is taken.
      const [mapped] = await sql.query<{ member_id: string; integration_id: string }>(
        `SELECT im.member_id, im.integration_id FROM integration_members im JOIN integrations i ON i.id = im.integration_id
         WHERE i.account_id = $1 AND lower(im.integrator_uuid) = $2`,
        [input.accountId, uuid],
      );
      if (mapped) throw new OperatorError(`${uuid} is mapped to member ${mapped.member_id} in integration ${mapped.integration_id}; give this member another UUID.`);
      const [row] = await sql.query<MemberRecord>(
        `INSERT INTO members (id, account_id, email, uuid, name, enabled, department_id, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         RETURNING id, account_id, email, uuid::text AS uuid, name, enabled, department_id`,
        [input.id ?? newId(ID_PREFIX.member), input.accountId, input.email, uuid, name, input.enabled ?? true, input.departmentId ?? null, clock.now()],
      );
      return row!;
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new OperatorError(`A member with this e-mail or UUID already exists.`);
    throw error;
  }
}

/**
 * Enables or disables a member's calls, moves or removes the member; applies on the next request.
 * What widgets show of the agent (its department, say) changes with it: the agent's WidgetState
 * version goes up in every integration that has one, so polls see it (no 304) and sockets get it.
 */
export async function updateMember(
  { db, bus }: OperatorDeps,
  memberId: string,
  change: { enabled?: boolean; removed?: boolean; departmentId?: string | null },
): Promise<void> {
  const agents = await db.tx(async (sql) => {
    if (change.departmentId) {
      const [member] = await sql.query<{ account_id: string }>('SELECT account_id FROM members WHERE id = $1', [memberId]);
      if (!member) throw new OperatorError(`No member ${memberId}.`);
      await assertDepartmentOfAccount(sql, member.account_id, change.departmentId);
    }
    // A removed member stays removed (its e-mail and UUID stay taken, so its history keeps its name).
    const rows = await sql.query(
      `UPDATE members SET enabled = coalesce($2, enabled), removed = coalesce($3, removed),
         department_id = CASE WHEN $4::boolean THEN $5 ELSE department_id END
       WHERE id = $1 AND NOT removed RETURNING id`,
      [memberId, change.enabled ?? null, change.removed ?? null, change.departmentId !== undefined, change.departmentId ?? null],
    );
    if (rows.length === 0) {
      const [found] = await sql.query('SELECT 1 FROM members WHERE id = $1', [memberId]);
      throw new OperatorError(found ? `Member ${memberId} was removed; a removed member cannot be changed.` : `No member ${memberId}.`);
    }
    // in key order, as every bump takes its rows (agentVersionBump), so two never deadlock
    return sql.query<{ integration_id: string; version: number }>(agentVersionBump('SELECT integration_id, member_id FROM agent_versions WHERE member_id = $1'), [memberId]);
  });
  // The member first: caches of it drop before the new versions are read.
  bus.publish({ type: 'member', memberId });
  for (const agent of agents) bus.publish({ type: 'agent', integrationId: agent.integration_id, memberId, version: agent.version });
}

/** An account's members, as an operator looks them up (spec section 1, step 4: each member's stable UUID is listed). */
/** Refuses an account id that names no account (a list of nothing would hide the typo). */
export async function assertAccount(sql: Pick<Sql, 'query'>, accountId: string): Promise<void> {
  const [account] = await sql.query('SELECT 1 FROM accounts WHERE id = $1', [accountId]);
  if (!account) throw new OperatorError(`No account ${accountId}.`);
}

/** An account as the operator sees it: its kind, status, balance and provider account (never the auth token or the API key's secret). */
export async function showAccount({ db }: Pick<OperatorDeps, 'db'>, accountId: string): Promise<AccountRecord> {
  const [row] = await db.query<AccountRecord>(
    'SELECT id, kind, name, status, balance_micros, currency, provider_account_sid, provider_api_key_sid, provider_twiml_app_sid FROM accounts WHERE id = $1',
    [accountId],
  );
  if (!row) throw new OperatorError(`No account ${accountId}.`);
  return { ...row, balance_micros: Number(row.balance_micros) };
}

/** An account's departments, by name. */
export async function listDepartments({ db }: Pick<OperatorDeps, 'db'>, accountId: string): Promise<Array<{ id: string; name: string }>> {
  await assertAccount(db, accountId);
  return db.query('SELECT id, name FROM departments WHERE account_id = $1 ORDER BY name, id', [accountId]);
}

export async function listMembers({ db }: Pick<OperatorDeps, 'db'>, accountId: string): Promise<Array<MemberRecord & { removed: boolean; department_name: string | null }>> {
  await assertAccount(db, accountId);
  return db.query(
    `SELECT m.id, m.account_id, m.email, m.uuid::text AS uuid, m.name, m.enabled, m.removed, m.department_id, d.name AS department_name
     FROM members m LEFT JOIN departments d ON d.id = m.department_id WHERE m.account_id = $1 ORDER BY m.created_at, m.id`,
    [accountId],
  );
}
