/**
 * Operator steps on integrations (spec section 1, "Integration setup"): create with a server key
 * shown once; allowed origins (lines that are not origins are refused and nothing is saved);
 * identifier and window mode; policy; coverage; per-member overrides and UUID mapping; key
 * rotation and revocation; disabling and revoking the integration.
 */
import { ID_PREFIX } from '../../../shared/prefixes.js';
import { parseOrigin } from '../../../shared/origin.js';
import { PAGE_LANGUAGE } from '../../../shared/schemas/resources.js';
import type { Control, IdentifierMode, NumberVisibility, WidgetDefaults } from '../../../shared/types.js';
import type { Db, Sql } from '../../store/index.js';
import { newId } from '../credentials.js';
import { widgetDefaults, type CoverageMode, type IntegrationRow, type MemberOverrides, type WindowMode } from '../integrations/model.js';
import { issueServerKey, revokeServerKeys } from '../server-keys.js';
import { parseE164 } from '../phone.js';
import { isSupportedCountry } from 'libphonenumber-js/max';
import { LIMITS } from '../../../shared/limits.js';
import { agentVersionBump } from '../agent-state.js';
import { ACCOUNT_LOCK, assertAccount, assertName, OperatorError, type OperatorDeps } from './accounts.js';

export interface PolicySettings {
  outbound?: boolean;
  inbound?: boolean;
  numberVisibility?: NumberVisibility;
  controls?: Control[];
  widget?: WidgetDefaults;
  maxCallSeconds?: number;
  callerId?: string | null;
  destinationCountries?: string[];
  premiumRateAllowed?: boolean;
  concurrencyLimit?: number;
}

/**
 * No cap above the platform's own (LIMITS.platformMaxCallSeconds, 4 h: every call ends there
 * whatever the policy says), which the widget would otherwise show as the agent's.
 */
const MAX_CALL_SECONDS = LIMITS.platformMaxCallSeconds;
/** decided: more concurrent calls than any one integration places */
const MAX_CONCURRENCY = 1_000_000;

function assertMaxCallSeconds(value: number | undefined): void {
  if (value !== undefined && !(Number.isInteger(value) && value > 0 && value <= MAX_CALL_SECONDS)) {
    throw new OperatorError(`max_call_seconds must be a whole number of seconds from 1 to ${MAX_CALL_SECONDS} (the platform's cap, 4 h): ${value}`);
  }
}

/** A caller ID the provider will dial from: a valid number (libphonenumber), not merely E.164-shaped. */
function assertCallerId(value: string | null | undefined): void {
  // an empty one too: stored, it would refuse every outgoing call no_caller_id
  if (value !== null && value !== undefined && parseE164(value)?.e164 !== value) throw new OperatorError(`The caller ID must be a valid number in E.164 form (+ and digits): ${value}`);
}

function policyColumns(settings: PolicySettings): Record<string, unknown> {
  assertMaxCallSeconds(settings.maxCallSeconds);
  if (settings.concurrencyLimit !== undefined && !(Number.isInteger(settings.concurrencyLimit) && settings.concurrencyLimit > 0 && settings.concurrencyLimit <= MAX_CONCURRENCY)) {
    throw new OperatorError(`The concurrency limit must be a whole number from 1 to ${MAX_CONCURRENCY}: ${settings.concurrencyLimit}`);
  }
  assertCallerId(settings.callerId);
  // a code the numbering plan knows (libphonenumber's, which names a called number's country): UK is GB, and UK would allow nothing
  const badCountry = settings.destinationCountries?.find((c) => !/^[A-Z]{2}$/.test(c) || !isSupportedCountry(c));
  if (badCountry !== undefined) throw new OperatorError(`Not an ISO 3166 country code that telephone numbers use: ${badCountry}${badCountry === 'UK' ? ' (the United Kingdom is GB)' : ''}`);
  const columns: Record<string, unknown> = {
    outbound: settings.outbound,
    inbound: settings.inbound,
    number_visibility: settings.numberVisibility,
    controls: settings.controls,
    widget_defaults: settings.widget ? JSON.stringify(settings.widget) : undefined,
    max_call_seconds: settings.maxCallSeconds,
    caller_id: settings.callerId,
    destination_countries: settings.destinationCountries,
    premium_rate_allowed: settings.premiumRateAllowed,
    concurrency_limit: settings.concurrencyLimit,
  };
  return Object.fromEntries(Object.entries(columns).filter(([, value]) => value !== undefined));
}

type BumpedAgents = Array<{ member_id: string; version: number }>;

/**
 * Bumps every known agent's version of the integration (what its widgets show may have changed),
 * taking the rows in key order as every bump does (agentVersionBump), so it never deadlocks with a
 * heartbeat batch or the reaper bumping some of the same agents.
 */
function bumpAgents(sql: Sql, integrationId: string): Promise<BumpedAgents> {
  return sql.query(agentVersionBump('SELECT integration_id, member_id FROM agent_versions WHERE integration_id = $1'), [integrationId]);
}

/**
 * Tells every node, once the change is committed: a node that heard of it earlier could read the
 * rows as they were and keep them (its caches, the state it pushes, the version it skips up to).
 */
function announce({ bus }: OperatorDeps, integrationId: string, agents: BumpedAgents): void {
  bus.publish({ type: 'integration', integrationId });
  for (const agent of agents) bus.publish({ type: 'agent', integrationId, memberId: agent.member_id, version: agent.version });
}

/**
 * Makes a change to an integration, and bumps its agents' versions, in one transaction; then tells
 * every node. Stored apart, a change whose bump then failed (a statement timeout) would be in the
 * store but never announced, and every node would go on with what it cached.
 */
async function changeIntegration<T>(deps: OperatorDeps, integrationId: string, change: (sql: Sql) => Promise<T>): Promise<T> {
  const { result, agents } = await deps.db.tx(async (sql) => {
    const result = await change(sql);
    return { result, agents: await bumpAgents(sql, integrationId) };
  });
  announce(deps, integrationId, agents);
  return result;
}

/** Sets these columns of an integration that is not revoked; resolves its row as changed. */
async function updateIn(sql: Sql, integrationId: string, columns: Record<string, unknown>): Promise<IntegrationRow> {
  const names = Object.keys(columns);
  if (names.length === 0) throw new OperatorError('Nothing to change.');
  const assignments = names.map((name, index) => `${name} = $${index + 2}`).join(', ');
  const [row] = await sql.query<IntegrationRow>(`UPDATE integrations SET ${assignments} WHERE id = $1 AND status <> 'revoked' RETURNING *`, [
    integrationId,
    ...Object.values(columns),
  ]);
  if (!row) throw await missingOrRevoked(sql, integrationId);
  return row;
}

async function update(deps: OperatorDeps, integrationId: string, columns: Record<string, unknown>): Promise<IntegrationRow> {
  if (Object.keys(columns).length === 0) throw new OperatorError('Nothing to change.');
  return changeIntegration(deps, integrationId, (sql) => updateIn(sql, integrationId, columns));
}

/** Why an integration a change found no row of was not changed: it does not exist, or it was revoked for good. */
async function missingOrRevoked(db: Db | Sql, integrationId: string): Promise<OperatorError> {
  const [found] = await db.query('SELECT 1 FROM integrations WHERE id = $1', [integrationId]);
  return new OperatorError(found ? `Integration ${integrationId} was revoked: it cannot be changed; create a new one.` : `No integration ${integrationId}.`);
}

/** Refuses (naming why) an integration that does not exist or was revoked; locks its row until the transaction ends. */
export async function assertIntegration(sql: Sql, integrationId: string): Promise<void> {
  const [row] = await sql.query("SELECT 1 FROM integrations WHERE id = $1 AND status <> 'revoked' FOR UPDATE", [integrationId]);
  if (!row) throw await missingOrRevoked(sql, integrationId);
}

/** Validates an allowed-origins list; every bad line is named and nothing is saved. */
export function parseOriginLines(lines: string[]): string[] {
  const kept = lines.map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#'));
  // A browser never sends a wildcard: such a line would match nothing, silently (origins are exact, spec section 5).
  const wildcards = kept.filter((line) => line.includes('*'));
  if (wildcards.length > 0) {
    throw new OperatorError(`Not saved: origins are exact, with no wildcard; list each one: ${wildcards.map((line) => JSON.stringify(line)).join(', ')}`);
  }
  const bad = kept.filter((line) => parseOrigin(line) === null);
  if (bad.length > 0) {
    throw new OperatorError(
      `Not saved: ${bad.length === 1 ? 'this line is not an origin' : 'these lines are not origins'} ` +
        `(scheme://host[:port], no path): ${bad.map((line) => JSON.stringify(line)).join(', ')}`,
    );
  }
  return [...new Set(kept.map((line) => parseOrigin(line)!))];
}

export async function createIntegration(
  deps: OperatorDeps,
  // coverage: set with it, in its transaction (else it covers everyone, the column's default)
  input: { id?: string; accountId: string; name: string; origins?: string[]; identifierMode?: IdentifierMode; windowMode?: WindowMode; coverage?: Coverage } & PolicySettings,
): Promise<{ integration: IntegrationRow; serverKey: string }> {
  const origins = parseOriginLines(input.origins ?? []);
  const { id: _id, accountId: _account, name: _name, origins: _origins, identifierMode: _mode, windowMode: _window, coverage, ...policy } = input;
  const columns = policyColumns(policy);
  const id = input.id ?? newId(ID_PREFIX.integration);
  const now = deps.clock.now();
  const created = await deps.db.tx(async (sql) => {
    await assertAccount(sql, input.accountId);
    const all: Record<string, unknown> = {
      id,
      account_id: input.accountId,
      // what the call window's consent question names
      name: assertName('integration', input.name),
      allowed_origins: origins,
      identifier_mode: input.identifierMode ?? 'email',
      window_mode: input.windowMode ?? 'popup',
      coverage_set_at: now,
      created_at: now,
      ...columns,
    };
    const names = Object.keys(all);
    let [integration] = await sql.query<IntegrationRow>(
      `INSERT INTO integrations (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING *`,
      Object.values(all),
    );
    if (coverage) {
      await writeCoverage(sql, id, coverage, now);
      [integration] = await sql.query<IntegrationRow>('SELECT * FROM integrations WHERE id = $1', [id]);
    }
    const key = await issueServerKey(sql, deps.clock, id);
    return { integration: integration!, serverKey: key.token };
  });
  // Every node then reads the origins it allows (CORS: api/http/origin-policy.ts) and knows it exists.
  deps.bus.publish({ type: 'integration', integrationId: id });
  return created;
}

export const setOrigins = (deps: OperatorDeps, integrationId: string, lines: string[]) =>
  update(deps, integrationId, { allowed_origins: parseOriginLines(lines) });

export const setAllowAllOrigins = (deps: OperatorDeps, integrationId: string, allowAll: boolean) =>
  update(deps, integrationId, { allow_all_origins: allowAll });

/** Spec section 1: 'Allow all origins' shows a warning until it is switched off. Its words, for every place that shows it. */
export const allowAllWarning = (integrationId: string) =>
  `integration ${integrationId} allows all origins: any site may use its widget. Switch it off before going live (c2c integration allow-all ${integrationId} off).`;

/** The integrations (not revoked) with 'Allow all origins' on. */
export async function integrationsAllowingAll(db: Db): Promise<string[]> {
  const rows = await db.query<{ id: string }>(`SELECT id FROM integrations WHERE allow_all_origins AND status <> 'revoked' ORDER BY id`);
  return rows.map((row) => row.id);
}

/** Warns of each integration allowing all origins, as a server starts; never stops the start (a warning). */
export async function warnOfAllowAll(db: Db, warn: (message: string) => void): Promise<void> {
  try {
    for (const id of await integrationsAllowingAll(db)) warn(allowAllWarning(id));
  } catch (error) {
    warn(`could not check which integrations allow all origins: ${(error as Error).message}`);
  }
}

export const setIdentifierMode = (deps: OperatorDeps, integrationId: string, mode: IdentifierMode) =>
  update(deps, integrationId, { identifier_mode: mode });

export const setWindowMode = (deps: OperatorDeps, integrationId: string, mode: WindowMode) =>
  update(deps, integrationId, { window_mode: mode });

export const setPolicy = (deps: OperatorDeps, integrationId: string, settings: PolicySettings) =>
  update(deps, integrationId, policyColumns(settings));

/** Coverage: everyone, selected members or departments; whether future members inherit. */
/**
 * An integration names only its own account's members and departments: a stray id (a typo, or
 * another account's member) is refused rather than written as a row that can never apply.
 */
async function assertOwn(sql: Sql, integrationId: string, table: 'members' | 'departments', ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const rows = await sql.query<{ id: string }>(
    `SELECT t.id FROM ${table} t JOIN integrations i ON i.account_id = t.account_id WHERE i.id = $1 AND t.id = ANY($2::text[])`,
    [integrationId, [...ids]],
  );
  const own = new Set(rows.map((row) => row.id));
  const stray = ids.filter((id) => !own.has(id));
  if (stray.length > 0) throw new OperatorError(`Not ${table} of integration ${integrationId}'s account: ${stray.join(', ')}.`);
}

export interface Coverage {
  mode: CoverageMode;
  inheritFuture?: boolean;
  memberIds?: string[];
  departmentIds?: string[];
}

export async function setCoverage(deps: OperatorDeps, integrationId: string, coverage: Coverage): Promise<void> {
  await changeIntegration(deps, integrationId, (sql) => writeCoverage(sql, integrationId, coverage, deps.clock.now()));
}

/** Sets an integration's coverage, in the caller's transaction. */
async function writeCoverage(sql: Sql, integrationId: string, coverage: Coverage, now: number): Promise<void> {
  // whether future members inherit stays as it was unless given
  const rows = await sql.query(
    `UPDATE integrations SET coverage_mode = $2, coverage_inherit_future = coalesce($3, coverage_inherit_future), coverage_set_at = $4
     WHERE id = $1 AND status <> 'revoked' RETURNING id`,
    [integrationId, coverage.mode, coverage.inheritFuture ?? null, now],
  );
  if (rows.length === 0) throw await missingOrRevoked(sql, integrationId);
  await assertOwn(sql, integrationId, 'members', coverage.memberIds ?? []);
  await assertOwn(sql, integrationId, 'departments', coverage.departmentIds ?? []);
  await sql.query('DELETE FROM integration_departments WHERE integration_id = $1', [integrationId]);
  for (const departmentId of coverage.departmentIds ?? []) {
    await sql.query('INSERT INTO integration_departments (integration_id, department_id) VALUES ($1, $2)', [integrationId, departmentId]);
  }
  await sql.query('UPDATE integration_members SET selected = false WHERE integration_id = $1', [integrationId]);
  for (const memberId of coverage.memberIds ?? []) {
    await sql.query(
      `INSERT INTO integration_members (integration_id, member_id, selected) VALUES ($1, $2, true)
       ON CONFLICT (integration_id, member_id) DO UPDATE SET selected = true`,
      [integrationId, memberId],
    );
  }
}

/** Per-member overrides (merged into the existing ones; null removes a key). */
/** A change to a member's overrides: a value sets one, null removes it (the integration's applies again), undefined leaves it. */
export type OverridesChange = { [K in keyof MemberOverrides]?: MemberOverrides[K] | null };

export async function setMemberOverrides(deps: OperatorDeps, integrationId: string, memberId: string, overrides: OverridesChange): Promise<void> {
  if (Object.values(overrides).every((value) => value === undefined)) throw new OperatorError('Nothing to change: give at least one override.');
  assertMaxCallSeconds(overrides.max_call_seconds ?? undefined);
  assertCallerId(overrides.caller_id);
  await changeIntegration(deps, integrationId, async (sql) => {
    const integration = await lockChangeable(sql, integrationId);
    // an override lowers the integration's cap, never raises it (the lower applies): said now, not ignored later
    const cap = overrides.max_call_seconds;
    if (typeof cap === 'number' && integration.max_call_seconds !== null && cap > integration.max_call_seconds) {
      throw new OperatorError(`max_call_seconds ${cap} is above the integration's ${integration.max_call_seconds}: an override may only lower it.`);
    }
    await assertOwn(sql, integrationId, 'members', [memberId]);
    await sql.query(
      `INSERT INTO integration_members (integration_id, member_id, overrides) VALUES ($1, $2, jsonb_strip_nulls($3::jsonb))
       ON CONFLICT (integration_id, member_id)
       DO UPDATE SET overrides = jsonb_strip_nulls(integration_members.overrides || $3::jsonb)`,
      [integrationId, memberId, JSON.stringify(overrides)],
    );
  });
}

/** In uuid mode: the integrator's own UUID for a member (null removes the mapping). */
export async function mapIntegratorUuid(deps: OperatorDeps, integrationId: string, memberId: string, integratorUuid: string | null): Promise<void> {
  await changeIntegration(deps, integrationId, async (sql) => {
    // locked, and its account: two mappings of one UUID at once (or a member created with it) would each find it free
    const integration = await lockChangeable(sql, integrationId);
    await sql.query(ACCOUNT_LOCK, [integration.account_id]);
    await assertOwn(sql, integrationId, 'members', [memberId]);
    if (integratorUuid !== null) {
      // One member per UUID: two would make every session for it agent_ambiguous. In uuid mode a
      // session's UUID also finds a member by its stable UUID, so another member's is taken too.
      const [taken] = await sql.query<{ member_id: string }>(
        `SELECT member_id FROM integration_members WHERE integration_id = $1 AND lower(integrator_uuid) = lower($2) AND member_id <> $3
         UNION ALL
         SELECT m.id FROM members m JOIN integrations i ON i.account_id = m.account_id
         WHERE i.id = $1 AND m.uuid::text = lower($2) AND m.id <> $3 AND NOT m.removed`,
        [integrationId, integratorUuid, memberId],
      );
      if (taken) throw new OperatorError(`${integratorUuid} is already member ${taken.member_id}'s in this integration; map it to one member only ("none" removes a mapping).`);
    }
    await sql.query(
      `INSERT INTO integration_members (integration_id, member_id, integrator_uuid) VALUES ($1, $2, $3)
       ON CONFLICT (integration_id, member_id) DO UPDATE SET integrator_uuid = EXCLUDED.integrator_uuid`,
      [integrationId, memberId, integratorUuid],
    );
  });
}

/** A new server key, shown once; the old one stops working on its next request. */
export async function rotateServerKey(deps: OperatorDeps, integrationId: string): Promise<string> {
  return deps.db.tx(async (sql) => {
    // locked as a revoke locks it: a key issued either before the revoke (which then revokes it too) or not at all
    const [row] = await sql.query<{ status: string }>('SELECT status FROM integrations WHERE id = $1 FOR NO KEY UPDATE', [integrationId]);
    if (!row) throw new OperatorError(`No integration ${integrationId}.`);
    if (row.status === 'revoked') throw new OperatorError('A revoked integration gets no new key; create a new integration.');
    return (await issueServerKey(sql, deps.clock, integrationId)).token;
  });
}

/** Revokes every live server key of the integration; resolves how many there were. */
export async function revokeServerKey(deps: OperatorDeps, integrationId: string): Promise<number> {
  return deps.db.tx(async (sql) => {
    // locked as a rotation locks it: a key a rotation under way issues is revoked too, not missed
    const [found] = await sql.query('SELECT 1 FROM integrations WHERE id = $1 FOR NO KEY UPDATE', [integrationId]);
    if (!found) throw new OperatorError(`No integration ${integrationId}.`);
    return revokeServerKeys(sql, deps.clock, integrationId);
  });
}

/**
 * Locks an integration for a change made in steps; refuses one that does not exist or was revoked.
 * NO KEY UPDATE, as every operator step locks it: rows that reference the integration (sessions,
 * calls, commands) are still inserted meanwhile.
 */
async function lockChangeable(sql: Sql, integrationId: string): Promise<IntegrationRow> {
  const [row] = await sql.query<IntegrationRow>('SELECT * FROM integrations WHERE id = $1 FOR NO KEY UPDATE', [integrationId]);
  if (!row || row.status === 'revoked') throw await missingOrRevoked(sql, integrationId);
  return row;
}

/** Disable (reversible) or enable an integration; a revoked integration stays revoked. */
export async function setIntegrationEnabled(deps: OperatorDeps, integrationId: string, enabled: boolean): Promise<IntegrationRow> {
  return changeIntegration(deps, integrationId, async (sql) => {
    // one conditional statement: an enable racing a revoke cannot write active over revoked
    const [row] = await sql.query<IntegrationRow>(`UPDATE integrations SET status = $2 WHERE id = $1 AND status <> 'revoked' RETURNING *`, [
      integrationId,
      enabled ? 'active' : 'disabled',
    ]);
    if (row) return row;
    const [found] = await sql.query('SELECT 1 FROM integrations WHERE id = $1', [integrationId]);
    throw new OperatorError(found ? 'A revoked integration cannot be enabled again; create a new one.' : `No integration ${integrationId}.`);
  });
}

/** An account's integrations: id, name, status, and whether they allow every origin. */
export async function listIntegrations({ db }: Pick<OperatorDeps, 'db'>, accountId: string) {
  await assertAccount(db, accountId);
  return db.query<{ integration_id: string; name: string; status: string; allow_all_origins: boolean; live_server_keys: number }>(
    `SELECT i.id AS integration_id, i.name, i.status, i.allow_all_origins,
       (SELECT count(*)::int FROM server_keys k WHERE k.integration_id = i.id AND k.revoked_at IS NULL) AS live_server_keys
     FROM integrations i WHERE i.account_id = $1 ORDER BY i.created_at, i.id`,
    [accountId],
  );
}

/** What an operator sees of an integration: its settings, origins, coverage and members' links; never a key. */
export async function describeIntegration({ db }: Pick<OperatorDeps, 'db'>, integrationId: string) {
  const [row] = await db.query<IntegrationRow>('SELECT * FROM integrations WHERE id = $1', [integrationId]);
  if (!row) throw new OperatorError(`No integration ${integrationId}.`);
  const departments = await db.query<{ department_id: string }>('SELECT department_id FROM integration_departments WHERE integration_id = $1 ORDER BY department_id', [integrationId]);
  const members = await db.query<{ member_id: string; selected: boolean; integrator_uuid: string | null; overrides: MemberOverrides }>(
    'SELECT member_id, selected, integrator_uuid, overrides FROM integration_members WHERE integration_id = $1 ORDER BY member_id',
    [integrationId],
  );
  const [keys] = await db.query<{ live: number }>('SELECT count(*)::int AS live FROM server_keys WHERE integration_id = $1 AND revoked_at IS NULL', [integrationId]);
  const numbers = await db.query<{ number: string }>('SELECT number FROM incoming_numbers WHERE integration_id = $1 ORDER BY number', [integrationId]);
  return {
    integration_id: row.id,
    account_id: row.account_id,
    name: row.name,
    status: row.status,
    allowed_origins: row.allowed_origins,
    allow_all_origins: row.allow_all_origins,
    identifier_mode: row.identifier_mode,
    window_mode: row.window_mode,
    widget: widgetDefaults(row.widget_defaults),
    policy: {
      outbound: row.outbound,
      inbound: row.inbound,
      number_visibility: row.number_visibility,
      controls: row.controls,
      max_call_seconds: row.max_call_seconds,
      caller_id: row.caller_id,
      destination_countries: row.destination_countries,
      premium_rate_allowed: row.premium_rate_allowed,
      concurrency_limit: row.concurrency_limit,
    },
    coverage: {
      mode: row.coverage_mode,
      inherit_future: row.coverage_inherit_future,
      department_ids: departments.map((d) => d.department_id),
      member_ids: members.filter((m) => m.selected).map((m) => m.member_id),
    },
    members: members
      .filter((m) => m.integrator_uuid !== null || Object.keys(m.overrides ?? {}).length > 0)
      .map((m) => ({ member_id: m.member_id, integrator_uuid: m.integrator_uuid, overrides: m.overrides ?? {} })),
    incoming_numbers: numbers.map((n) => n.number),
    live_server_keys: keys?.live ?? 0,
  };
}

/** A language tag such as en, fr or fr-CA. */
const LANGUAGE_TAG = /^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/;

/** The widget's defaults (spec section 1, step 5): its corner and language, each kept unless given. */
export async function setWidgetDefaults(deps: OperatorDeps, integrationId: string, change: Partial<WidgetDefaults>): Promise<WidgetDefaults> {
  if (change.position === undefined && change.language === undefined) throw new OperatorError('Nothing to change: give --position or --language.');
  if (change.language !== undefined && change.language !== PAGE_LANGUAGE && !(LANGUAGE_TAG.test(change.language) && change.language.length <= 16)) {
    throw new OperatorError(`Not a language tag (such as en, fr or fr-CA) nor ${PAGE_LANGUAGE}: ${change.language}`);
  }
  const updated = await changeIntegration(deps, integrationId, async (sql) => {
    // read and written under the lock: a language and a corner set at once are both kept
    const row = await lockChangeable(sql, integrationId);
    const widget: WidgetDefaults = { ...widgetDefaults(row.widget_defaults), ...Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)) };
    return updateIn(sql, integrationId, policyColumns({ widget }));
  });
  return widgetDefaults(updated.widget_defaults);
}
