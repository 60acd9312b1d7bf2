/**
 * Server keys (c2ck_): held by the integrator's backend only, shown once at creation or rotation,
 * stored as SHA-256. Rotation revokes every older key of the integration in the same transaction,
 * so the old key fails on the very next request.
 */
import { C2CError } from '../../shared/errors.js';
import { ID_PREFIX } from '../../shared/prefixes.js';
import type { Clock } from '../clock.js';
import type { Db, Sql } from '../store/index.js';
import { mintCredential, newId, parseCredential, secretMatches } from './credentials.js';
import { INTEGRATION_COLUMNS, type IntegrationWithAccount } from './integrations/repo.js';

export interface ServerKeyContext {
  keyId: string;
  integration: IntegrationWithAccount;
}

/** Issues a new key for the integration and revokes all others; returns the token, once. */
export async function issueServerKey(sql: Sql, clock: Clock, integrationId: string): Promise<{ id: string; token: string }> {
  const credential = mintCredential('serverKey');
  const id = newId(ID_PREFIX.serverKey);
  const now = clock.now();
  await sql.query('UPDATE server_keys SET revoked_at = $2 WHERE integration_id = $1 AND revoked_at IS NULL', [integrationId, now]);
  await sql.query(
    'INSERT INTO server_keys (id, integration_id, lookup, secret_hash, created_at) VALUES ($1, $2, $3, $4, $5)',
    [id, integrationId, credential.lookup, credential.secretHash, now],
  );
  return { id, token: credential.token };
}

export async function revokeServerKeys(sql: Sql, clock: Clock, integrationId: string): Promise<number> {
  const rows = await sql.query(
    'UPDATE server_keys SET revoked_at = $2 WHERE integration_id = $1 AND revoked_at IS NULL RETURNING id',
    [integrationId, clock.now()],
  );
  return rows.length;
}

/** Authenticates `Authorization: Bearer c2ck_…`; the integration's own state is checked by each endpoint. */
export async function authenticateServerKey(db: Db, token: string | undefined): Promise<ServerKeyContext> {
  const presented = parseCredential('serverKey', token);
  if (!presented) throw new C2CError('unauthorized', 'A server key (Authorization: Bearer c2ck_…) is required.');
  const [row] = await db.query<IntegrationWithAccount & { key_id: string; key_hash: Uint8Array; key_revoked_at: number | null }>(
    `SELECT ${INTEGRATION_COLUMNS}, k.id AS key_id, k.secret_hash AS key_hash, k.revoked_at AS key_revoked_at
     FROM server_keys k JOIN integrations i ON i.id = k.integration_id JOIN accounts a ON a.id = i.account_id
     WHERE k.lookup = $1`,
    [presented.lookup],
  );
  // a revoked integration's keys are revoked with it; checked here too, so that no path that forgets can bring one back
  if (!row || !secretMatches(row.key_hash, presented) || row.key_revoked_at !== null || row.status === 'revoked') {
    throw new C2CError('unauthorized', 'The server key is unknown or revoked.');
  }
  const { key_id, key_hash: _hash, key_revoked_at: _revoked, ...integration } = row;
  return { keyId: key_id, integration };
}
