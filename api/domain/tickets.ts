/**
 * Launch tickets (spec sections 1 and 5): minted by a widget, carried to the call window in the
 * URL fragment (never the query, so it reaches no server log), consumed once by pairing, dead
 * after 10 minutes. Stored hashed like every credential.
 */
import { C2CError } from '../../shared/errors.js';
import { LIMITS } from '../../shared/limits.js';
import { ID_PREFIX } from '../../shared/prefixes.js';
import type { Clock } from '../clock.js';
import type { Sql } from '../store/index.js';
import { mintCredential, newId, parseCredential, secretMatches, sha256 } from './credentials.js';
import type { WidgetContext } from './sessions.js';

export interface LaunchTicket {
  ticket: string;
  windowUrl: string;
  windowName: string;
  expiresIn: number;
}

/** A window name that is the same for every page of one agent, so window.open() finds the live window. */
export function windowName(integrationId: string, memberId: string): string {
  return `c2c_${sha256(`${integrationId}:${memberId}`).toString('hex').slice(0, 16)}`;
}

export async function issueTicket(sql: Sql, clock: Clock, siteUrl: string, widget: WidgetContext): Promise<LaunchTicket> {
  const credential = mintCredential('launchTicket');
  const now = clock.now();
  await sql.query(
    `INSERT INTO launch_tickets (id, widget_session_id, integration_id, member_id, lookup, secret_hash, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      newId(ID_PREFIX.launchTicket),
      widget.session.id,
      widget.integration.id,
      widget.agent.member.id,
      credential.lookup,
      credential.secretHash,
      now,
      now + LIMITS.launchTicketTtlSeconds * 1000,
    ],
  );
  return {
    ticket: credential.token,
    windowUrl: `${siteUrl}/click2call/window#ticket=${encodeURIComponent(credential.token)}`,
    windowName: windowName(widget.integration.id, widget.agent.member.id),
    expiresIn: LIMITS.launchTicketTtlSeconds,
  };
}

export interface ConsumedTicket {
  id: string;
  integration_id: string;
  member_id: string;
  widget_session_id: string;
  /**
   * The engine the ticket paired already, when this is that pairing asked again (its answer was
   * lost) with the same attempt id, while the ticket would still be good: it is answered again.
   */
  pairedEngineId: string | null;
}

/**
 * Consumes a ticket inside the caller's transaction; a replayed, expired or unknown ticket is 401,
 * as is one whose widget session has ended. The session's end is read on its first token, where a
 * revoke always writes it (sessions.ts): the token that minted the ticket may have been refreshed
 * away and expired before the revoke, which then leaves it unmarked.
 */
export async function consumeTicket(sql: Sql, clock: Clock, ticket: string, attempt?: string): Promise<ConsumedTicket> {
  const presented = parseCredential('launchTicket', ticket);
  if (!presented) throw new C2CError('ticket_invalid');
  const [row] = await sql.query<ConsumedTicket & { id: string; secret_hash: Uint8Array }>(
    `SELECT t.id, t.secret_hash, t.integration_id, t.member_id, t.widget_session_id
     FROM launch_tickets t
     JOIN widget_sessions s ON s.id = t.widget_session_id
     JOIN widget_sessions f ON f.id = COALESCE(s.family_id, s.id)
     WHERE t.lookup = $1 AND s.revoked_at IS NULL AND f.revoked_at IS NULL`,
    [presented.lookup],
  );
  if (!row || !secretMatches(row.secret_hash, presented)) throw new C2CError('ticket_invalid');
  const now = clock.now();
  const consumed = await sql.query(
    'UPDATE launch_tickets SET consumed_at = $2, pair_attempt = $3 WHERE id = $1 AND consumed_at IS NULL AND expires_at > $2 RETURNING id',
    [row.id, now, attempt ?? null],
  );
  const ticketOf = (pairedEngineId: string | null): ConsumedTicket => ({
    id: row.id,
    integration_id: row.integration_id,
    member_id: row.member_id,
    widget_session_id: row.widget_session_id,
    pairedEngineId,
  });
  if (consumed.length > 0) return ticketOf(null);
  if (attempt !== undefined) {
    // the same pairing asked again: locked, so that two repeats answer one after the other
    const [again] = await sql.query<{ engine_id: string }>(
      'SELECT engine_id FROM launch_tickets WHERE id = $1 AND pair_attempt = $2 AND engine_id IS NOT NULL AND expires_at > $3 FOR UPDATE',
      [row.id, attempt, now],
    );
    if (again) return ticketOf(again.engine_id);
  }
  throw new C2CError('ticket_invalid');
}

/** Records the engine a ticket paired, so that the same pairing asked again is answered with it. */
export async function recordPairedEngine(sql: Sql, ticketId: string, engineId: string): Promise<void> {
  await sql.query('UPDATE launch_tickets SET engine_id = $2 WHERE id = $1', [ticketId, engineId]);
}
