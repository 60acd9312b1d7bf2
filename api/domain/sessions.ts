/**
 * Widget sessions (spec sections 4 and 5): created by the backend for one agent on one origin,
 * held by the page as a widget token (c2cw_, 30 minutes, renewable), checked on every request
 * against its origin, the integration and the member, so revocation, disabling and un-assigning
 * apply on the next request.
 */
import { C2CError, isRefusal } from '../../shared/errors.js';
import { ID_PREFIX } from '../../shared/prefixes.js';
import type { SessionRequest } from '../../shared/types.js';
import type { Bus } from '../bus/index.js';
import type { Clock } from '../clock.js';
import { lookupTogether } from '../store/coalesce.js';
import type { Db, Sql } from '../store/index.js';
import { resolveAgent, type ResolvedAgent } from './agents.js';
import { createBusCache } from './bus-cache.js';
import type { Directory } from './directory.js';
import { mintCredential, newId, ownCopy, parseCredential, secretMatches } from './credentials.js';
import { assertIntegrationUsable, originAllowed, type IntegrationWithAccount } from './integrations/repo.js';
import { parseOrigin } from '../../shared/origin.js';
import { LIMITS } from '../../shared/limits.js';

export interface WidgetSessionRow {
  id: string;
  integration_id: string;
  member_id: string;
  origin: string;
  lookup: string;
  secret_hash: Uint8Array;
  created_at: number;
  expires_at: number;
  revoked_at: number | null;
  end_reason: string | null;
  /** on a token made by a refresh, the id of its session's first token (revoke ends them all); null on a first token */
  family_id: string | null;
  /** the server key that created the session (null before migration 009): refreshed only while it is current */
  server_key_id: string | null;
}

/**
 * How long after its server key is rotated or revoked a widget session is still refreshed: time
 * for the integrator to deploy the new key to its backend. A widget refused sooner would ask a
 * backend still holding the old key, be refused again, and end (unauthorized) mid-shift.
 */
export const ROTATED_KEY_REFRESH_GRACE_MS = 60 * 60_000;

/** The id naming a token's session: its first token's. */
const sessionOf = (row: Pick<WidgetSessionRow, 'id' | 'family_id'>) => row.family_id ?? row.id;

/** An authenticated widget request: who, where, and under which policy. */
export interface WidgetContext {
  session: WidgetSessionRow;
  integration: IntegrationWithAccount;
  agent: ResolvedAgent;
}

/** A token's checks as last read from the store: the context, or the refusal it earned. */
interface CachedAuth {
  session: WidgetSessionRow;
  integration: IntegrationWithAccount;
  outcome: { agent: ResolvedAgent } | { failure: C2CError };
}

export interface SessionsDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  directory: Directory;
  widgetTokenTtlSeconds: number;
}

/**
 * The refusal of a widget token that has expired: `unauthorized` on the wire, as any dead token,
 * but a socket found on one mid-connection is told `token_expired` (reconnect with a refreshed
 * token), not a final refusal (gateway/endings.ts).
 */
export class WidgetTokenExpired extends C2CError {
  constructor() {
    super('unauthorized', 'The widget token has expired; refresh it or ask the session endpoint again.');
  }
}

export function createSessions({ db, bus, clock, directory, widgetTokenTtlSeconds }: SessionsDeps) {
  const ttlMs = widgetTokenTtlSeconds * 1000;

  /** A new token: of a new session, or (`familyId`) of the session it was refreshed from. */
  async function insertSession(sql: Sql, integrationId: string, memberId: string, origin: string, serverKeyId: string | null, familyId: string | null = null) {
    const credential = mintCredential('widgetToken');
    const now = clock.now();
    const id = newId(ID_PREFIX.widgetSession);
    await sql.query(
      `INSERT INTO widget_sessions (id, integration_id, member_id, origin, lookup, secret_hash, created_at, expires_at, family_id, server_key_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [id, integrationId, memberId, origin, credential.lookup, credential.secretHash, now, now + ttlMs, familyId, serverKeyId],
    );
    await sql.query(
      'INSERT INTO agent_versions (integration_id, member_id) VALUES ($1, $2) ON CONFLICT DO NOTHING',
      [integrationId, memberId],
    );
    return { id, token: credential.token, expiresAt: now + ttlMs };
  }

  // Widget requests are the hot path (polls): the checks that read the store are cached per token.
  // A message about a session's first token (its revoke) drops the checks of all its tokens, which
  // read their end there (loadContext).
  const contexts = createBusCache<CachedAuth>(
    bus,
    clock,
    (message) => message.type === 'session' || message.type === 'integration' || message.type === 'member',
    (context, message) =>
      (message.type === 'session' && (context.session.id === message.sessionId || sessionOf(context.session) === message.sessionId)) ||
      (message.type === 'integration' && context.integration.id === message.integrationId) ||
      (message.type === 'member' && context.session.member_id === message.memberId),
  );

  // With the end of the token's session, as its first token records it (see revoke).
  const sessionByLookup = lookupTogether<WidgetSessionRow & { session_revoked_at: number | null }>(
    db,
    `SELECT s.*, f.revoked_at AS session_revoked_at FROM widget_sessions s LEFT JOIN widget_sessions f ON f.id = s.family_id
     WHERE s.lookup = ANY($1::text[])`,
    (row) => row.lookup,
  );

  async function loadContext(lookup: string): Promise<CachedAuth> {
    const found = await sessionByLookup(lookup);
    if (!found) throw new C2CError('unauthorized');
    const { session_revoked_at: sessionRevokedAt, ...row } = found;
    // A token is dead once its session is: a revoke may leave a token it judged expired unmarked,
    // and a node whose clock lags may not judge it so yet.
    const session = { ...row, secret_hash: ownCopy(row.secret_hash), revoked_at: row.revoked_at ?? sessionRevokedAt };
    const integration = await directory.integration(session.integration_id);
    if (!integration) throw new C2CError('unauthorized');
    try {
      assertIntegrationUsable(integration);
      if (!originAllowed(integration, session.origin)) throw new C2CError('origin_not_allowed');
      return { session, integration, outcome: { agent: await directory.agent(integration, session.member_id) } };
    } catch (error) {
      // A failure of the moment (the database not answering) is thrown, never cached as the token's answer.
      if (!isRefusal(error)) throw error;
      return { session, integration, outcome: { failure: error } };
    }
  }

  /** The checks of the token itself: its secret, its life, its Origin (the policy's outcome is the caller's). */
  async function holderOf(token: string | undefined, originHeader: string | undefined): Promise<CachedAuth> {
    const presented = parseCredential('widgetToken', token);
    if (!presented) throw new C2CError('unauthorized');
    const context = contexts.get(presented.lookup) ?? (await contexts.load(presented.lookup, () => loadContext(presented.lookup)));
    const { session } = context;
    if (!secretMatches(session.secret_hash, presented)) throw new C2CError('unauthorized');
    if (session.revoked_at !== null) throw new C2CError('unauthorized', 'The widget session has ended.');
    if (session.expires_at <= clock.now()) throw new WidgetTokenExpired();
    if (originHeader === undefined || parseOrigin(originHeader) !== session.origin) {
      throw new C2CError('origin_not_allowed', 'A widget token works only on the origin it was created for.');
    }
    return context;
  }

  return {
    /** POST /sessions: the integration is the server key's (`serverKeyId`); checks run in the documented order. */
    async create(integration: IntegrationWithAccount, serverKeyId: string, request: SessionRequest) {
      if (request.integration_id !== integration.id) throw new C2CError('integration_mismatch');
      assertIntegrationUsable(integration);
      const origin = parseOrigin(request.origin)!;
      if (!originAllowed(integration, origin)) {
        throw new C2CError('origin_not_allowed', `The origin ${origin} is not in the integration's allowed list.`);
      }
      const agent = await resolveAgent(db, integration, request.agent);
      const session = await insertSession(db, integration.id, agent.member.id, origin, serverKeyId);
      return { ...session, agent };
    },

    /** Authenticates a widget token presented from an Origin; every failure has its code. */
    async authenticate(token: string | undefined, originHeader: string | undefined): Promise<WidgetContext> {
      const context = await holderOf(token, originHeader);
      if ('failure' in context.outcome) throw context.outcome.failure;
      return { session: context.session, integration: context.integration, agent: context.outcome.agent };
    },

    /**
     * The session of a widget token presented from its own Origin, whatever the policy says of it
     * now: POST /widget/revoke. A logout must not be refused because the agent was disabled or
     * un-assigned meanwhile, or the integration disabled: the token would come back to life, for
     * the rest of its 30 minutes and every refresh after, once the operator switched things back on.
     */
    async authenticateHolder(token: string | undefined, originHeader: string | undefined): Promise<WidgetSessionRow> {
      return (await holderOf(token, originHeader)).session;
    },

    /**
     * POST /widget/refresh: a new token of the same session (agent, origin); the others live on
     * for a short grace. A token refreshed again during that grace (a client whose first answer was
     * lost) gets another: all stay one session, which a revoke ends whole. A session holds one
     * token of full life, the newest: every other of its tokens is cut to the grace, so refreshing
     * one token again and again makes no more than one lasting credential (each could otherwise hold
     * its own sockets on every node, and be pushed every change).
     */
    async refresh(context: WidgetContext) {
      const { session } = context;
      const family = sessionOf(session);
      let shortened: string[] = [];
      return db.tx(async (sql) => {
        // The session's first token is locked, first, as a revoke locks it: a refresh either commits
        // before a revoke (which then ends the new token as well) or sees the revoke and is refused,
        // also on a node whose cached check has not heard of the revoke yet. Only that row is
        // locked, in the same order as a revoke, so the two never deadlock.
        const [first] = await sql.query<{ revoked_at: number | null }>('SELECT revoked_at FROM widget_sessions WHERE id = $1 FOR UPDATE', [family]);
        const [own] = family === session.id ? [first] : await sql.query<{ revoked_at: number | null }>('SELECT revoked_at FROM widget_sessions WHERE id = $1', [session.id]);
        if (first?.revoked_at != null || own?.revoked_at != null) throw new C2CError('unauthorized', 'The widget session has ended.');
        // A session lives on by refreshes only while the key that made it is current, or was
        // until lately: after a rotation (a leak, say) what the old key made ends within the
        // grace and one token lifetime, and the SDK, refused, asks the backend, which by then
        // holds the new key, for a new session.
        if (session.server_key_id !== null) {
          const [key] = await sql.query<{ revoked_at: number | null }>('SELECT revoked_at FROM server_keys WHERE id = $1', [session.server_key_id]);
          if (!key || (key.revoked_at !== null && key.revoked_at + ROTATED_KEY_REFRESH_GRACE_MS <= clock.now())) {
            throw new C2CError('unauthorized', 'The server key that created this widget session was rotated or revoked; ask the session endpoint again.');
          }
        }
        const fresh = await insertSession(sql, session.integration_id, session.member_id, session.origin, session.server_key_id, family);
        const graceEnd = clock.now() + LIMITS.widgetTokenRefreshGraceSeconds * 1000;
        const cut = await sql.query<{ id: string }>(
          `UPDATE widget_sessions SET expires_at = $3 WHERE (id = $1 OR family_id = $1) AND id <> $2 AND revoked_at IS NULL AND expires_at > $3 RETURNING id`,
          [family, fresh.id, graceEnd],
        );
        shortened = cut.map((row) => row.id);
        return fresh;
      }).finally(() => {
        // their sockets learn of the shorter life (a re-check reads it) and end with it
        for (const sessionId of new Set([session.id, ...shortened])) bus.publish({ type: 'session', sessionId, reason: 'refreshed' });
      });
    },

    /** POST /widget/revoke: ends this widget session, every token refreshed from or to this one (not the call). */
    async revoke(session: Pick<WidgetSessionRow, 'id' | 'family_id'>, reason = 'revoked') {
      const family = sessionOf(session);
      const ended = await db.tx(async (sql) => {
        await sql.query('SELECT 1 FROM widget_sessions WHERE id = $1 FOR UPDATE', [family]); // see refresh
        // The first token always: it is the session's end, which a refresh, every token's check and
        // a launch ticket's pairing read there (tickets.ts). The others while they live, so that a
        // node that has them cached hears of each: an expired one is refused anyway (also by its
        // session's end, should a node's clock lag), and is what the retention pass deletes.
        return sql.query<{ id: string }>(
          `UPDATE widget_sessions SET revoked_at = $2, end_reason = $3
           WHERE (id = $1 OR (family_id = $1 AND expires_at > $2)) AND revoked_at IS NULL RETURNING id`,
          [family, clock.now(), reason],
        );
      });
      for (const sessionId of new Set([session.id, ...ended.map((row) => row.id)])) bus.publish({ type: 'session', sessionId, reason });
    },
  };
}

export type Sessions = ReturnType<typeof createSessions>;
