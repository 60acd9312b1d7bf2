/**
 * Pairing (POST /engine/pair): a call window consumes its launch ticket and becomes the agent's
 * engine. One engine per agent per integration: a second window replaces the first, unless the
 * first is on a call, in which case the second is refused (409 agent_busy) and its ticket stays
 * unused, so it can pair once the call ends.
 *
 * A window whose pairing answer was lost (a timeout, a dropped connection) cannot tell whether it
 * paired, and its ticket is spent if it did. It asks again with the same ticket and the same
 * `attempt` id (made once per ticket, sent with each try): while the ticket would still be good,
 * that is answered with the engine the first try made, under a new token (the lost one's token is
 * replaced). Without it the window would be told its ticket was used, and the widget, seeing that
 * engine live, would only bring the window forward until the engine went offline.
 */
import { C2CError } from '../../../shared/errors.js';
import { ID_PREFIX } from '../../../shared/prefixes.js';
import type { Clock } from '../../clock.js';
import type { Db, Sql } from '../../store/index.js';
import { reloadAgent, type ResolvedAgent } from '../agents.js';
import { Changes } from '../changes.js';
import { ON_ENGINE_STATUS_LIST } from '../calls/checks.js';
import { mintCredential, newId } from '../credentials.js';
import { agentLock } from '../locks.js';
import { assertIntegrationUsable, findIntegration, type IntegrationWithAccount } from '../integrations/repo.js';
import { consumeTicket, recordPairedEngine } from '../tickets.js';
import type { EngineRow } from '../views.js';
import { failCommandsOfClosedWindows } from './closed-commands.js';

export interface Pairing {
  token: string;
  engine: EngineRow;
  integration: IntegrationWithAccount;
  agent: ResolvedAgent;
  changes: Changes;
}

/** A window closed by its own unload this recently, and paired again, was reloaded. */
const RELOAD_WITHIN_MS = 5 * 60 * 1000;

/**
 * The availability a new window starts with. It keeps that of the window it takes over from: one
 * still live (opened again), or one that closed itself on unload moments ago (a reload, which
 * closes the engine: docs/window.md). An agent on a break must not start ringing because the
 * window was reloaded. Otherwise it starts Available: a window opened afresh, or after the last
 * one went offline (the laptop slept) or was closed for good (README: availability).
 */
async function availabilityCarriedOver(sql: Sql, integrationId: string, memberId: string, now: number): Promise<boolean> {
  const [latest] = await sql.query<Pick<EngineRow, 'available' | 'state' | 'closed_at'> & { close_reason: string | null }>(
    // ties (two pairings in one millisecond) go to the open one, then the one closed last
    `SELECT available, state, close_reason, closed_at FROM engines WHERE integration_id = $1 AND member_id = $2
     ORDER BY created_at DESC, closed_at DESC NULLS FIRST LIMIT 1`,
    [integrationId, memberId],
  );
  if (!latest) return true;
  const live = latest.state === 'ready' || latest.state === 'enabling';
  const reloaded = latest.state === 'closed' && latest.close_reason === 'unload' && latest.closed_at !== null && now - Number(latest.closed_at) <= RELOAD_WITHIN_MS;
  return live || reloaded ? latest.available : true;
}

const ENGINE_COLUMNS = 'id, integration_id, member_id, client, simulated, state, mic_ready, available, busy, muted, version, created_at, last_seen_at, closed_at, registered';

export async function pairEngine(
  db: Db,
  clock: Clock,
  input: { ticket: string; simulated: boolean; client: 'window' | 'extension'; attempt?: string | undefined },
): Promise<Pairing> {
  const changes = new Changes();
  const credential = mintCredential('engineToken');
  const result = await db.tx(async (sql) => {
    const ticket = await consumeTicket(sql, clock, input.ticket, input.attempt);
    const integration = await findIntegration(sql, ticket.integration_id);
    if (!integration) throw new C2CError('ticket_invalid');
    assertIntegrationUsable(integration);
    const agent = await reloadAgent(sql, integration, ticket.member_id);
    await sql.query('SELECT pg_advisory_xact_lock(hashtext($1))', [agentLock(integration.id, agent.member.id)]);
    if (ticket.pairedEngineId !== null) {
      // the same pairing asked again: its engine, if still open, under a new token
      const [engine] = await sql.query<EngineRow>(
        `UPDATE engines SET lookup = $2, secret_hash = $3 WHERE id = $1 AND state <> 'closed' RETURNING ${ENGINE_COLUMNS}`,
        [ticket.pairedEngineId, credential.lookup, credential.secretHash],
      );
      if (!engine) throw new C2CError('ticket_invalid');
      // the lost answer's token stops on every node, and any socket it opened is ended
      changes.engineRetokened(engine.id);
      return { engine, integration, agent };
    }

    // Locked before its calls are checked: a claim of that window (which holds its row FOR SHARE)
    // either committed before, and the check finds the call, or waits, and then finds it closed.
    const [previous] = await sql.query<EngineRow>(
      `SELECT * FROM engines WHERE integration_id = $1 AND member_id = $2 AND state <> 'closed' FOR NO KEY UPDATE`,
      [integration.id, agent.member.id],
    );
    const now = clock.now();
    const available = await availabilityCarriedOver(sql, integration.id, agent.member.id, now);
    if (previous) {
      const [onCall] = await sql.query(`SELECT 1 FROM call_intents WHERE engine_id = $1 AND status IN (${ON_ENGINE_STATUS_LIST}) LIMIT 1`, [previous.id]);
      if (onCall) throw new C2CError('agent_busy', 'The agent\'s call window is on a call; a second window cannot replace it now.');
      await sql.query(`UPDATE engines SET state = 'closed', closed_at = $2, close_reason = 'replaced', version = version + 1 WHERE id = $1`, [previous.id, now]);
      await failCommandsOfClosedWindows(sql, changes, now, [previous.id]);
      changes.engineClosed(previous.id, 'replaced');
    }
    const [engine] = await sql.query<EngineRow>(
      `INSERT INTO engines (id, integration_id, member_id, lookup, secret_hash, client, simulated, created_at, last_seen_at, available)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)
       RETURNING ${ENGINE_COLUMNS}`,
      [newId(ID_PREFIX.engine), integration.id, agent.member.id, credential.lookup, credential.secretHash, input.client, input.simulated, now, available],
    );
    await recordPairedEngine(sql, ticket.id, engine!.id);
    await changes.touchAgent(sql, integration.id, agent.member.id);
    return { engine: engine!, integration, agent };
  });
  return { token: credential.token, changes, ...result };
}
