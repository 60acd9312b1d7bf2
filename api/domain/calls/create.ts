/**
 * POST /calls (spec section 3, "(none) → queued"): checks in the documented order, then a queued
 * intent with the policy, caller ID and rate frozen into it. Idempotency-Key: the same key and
 * body return the same intent (replayed), a different body is idempotency_conflict. Creation is
 * serialized per integration, so the concurrency limit and agent_busy hold under concurrent calls.
 */
import { C2CError } from '../../../shared/errors.js';
import { LIMITS } from '../../../shared/limits.js';
import { ID_PREFIX } from '../../../shared/prefixes.js';
import type { CallRequest } from '../../../shared/types.js';
import type { Clock } from '../../clock.js';
import type { Db, Sql } from '../../store/index.js';
import { newId, sha256 } from '../credentials.js';
import type { IntegrationWithAccount } from '../integrations/repo.js';
import type { CallRow } from '../views.js';
import { Changes } from '../changes.js';
import { integrationLock } from '../locks.js';
import { checkCallRequest, checkSameIntegration } from './checks.js';
import { checkAgentEngine } from './engine-checks.js';

export interface CreatedCall {
  call: CallRow;
  /** true when an earlier request with the same Idempotency-Key made this intent */
  replayed: boolean;
  /** what to announce once committed (nothing for a replay) */
  changes: Changes;
}

/** JSON with sorted keys, so key order in the body does not change the request's identity. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

async function findByKey(sql: Sql, integrationId: string, key: string): Promise<CallRow | undefined> {
  const [row] = await sql.query<CallRow>('SELECT * FROM call_intents WHERE integration_id = $1 AND idempotency_key = $2', [integrationId, key]);
  return row;
}

function replay(existing: CallRow, requestHash: Buffer): CreatedCall {
  if (!existing.request_hash || !requestHash.equals(Buffer.from(existing.request_hash))) {
    throw new C2CError('idempotency_conflict');
  }
  return { call: existing, replayed: true, changes: new Changes() };
}

export async function createCall(
  db: Db,
  clock: Clock,
  integration: IntegrationWithAccount,
  request: CallRequest,
  idempotencyKey: string | undefined,
): Promise<CreatedCall> {
  checkSameIntegration(integration, request);
  const requestHash = sha256(canonicalJson(request));
  if (idempotencyKey) {
    const existing = await findByKey(db, integration.id, idempotencyKey);
    if (existing) return replay(existing, requestHash);
  }
  return db.tx(async (sql) => {
    if (idempotencyKey) {
      const existing = await findByKey(sql, integration.id, idempotencyKey);
      if (existing) return replay(existing, requestHash);
    }
    const checked = await checkCallRequest(sql, integration, request);
    const memberId = checked.agent.member.id;
    const engine = await checkAgentEngine(sql, integration.id, memberId);
    const now = clock.now();
    const [call] = await sql.query<CallRow>(
      `INSERT INTO call_intents (id, integration_id, account_id, member_id, direction, status, phone_number,
         display_name, display_company, contact_reference, department, metadata, policy, caller_id,
         per_minute_micros, idempotency_key, request_hash, created_at, expires_at)
       VALUES ($1, $2, $3, $4, 'outbound', 'queued', $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
       RETURNING *`,
      [
        newId(ID_PREFIX.callIntent),
        integration.id,
        integration.account_id,
        memberId,
        checked.number.e164,
        request.display_name ?? null,
        request.display_company ?? null,
        request.contact_reference ?? null,
        checked.agent.member.department_name,
        request.metadata ? JSON.stringify(request.metadata) : null,
        JSON.stringify(checked.agent.effective.policy),
        checked.callerId,
        checked.perMinuteMicros,
        idempotencyKey ?? null,
        requestHash,
        now,
        now + LIMITS.callIntentExpirySeconds * 1000,
      ],
    );
    const changes = new Changes().engineWork(engine.id);
    await changes.touchAgent(sql, integration.id, memberId);
    return { call: call!, replayed: false, changes };
  }, { lock: integrationLock(integration.id) });
}
