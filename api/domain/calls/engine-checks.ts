/**
 * The last checks of POST /calls (spec section 4): the agent has a ready engine with a microphone
 * and is not on another call. A queued intent counts as a call: an agent gets one call at a time.
 */
import { C2CError } from '../../../shared/errors.js';
import type { Sql } from '../../store/index.js';
import type { EngineRow } from '../views.js';
import { LIVE_STATUS_LIST } from './checks.js';

export async function checkAgentEngine(sql: Sql, integrationId: string, memberId: string): Promise<EngineRow> {
  const [engine] = await sql.query<EngineRow>(
    `SELECT * FROM engines WHERE integration_id = $1 AND member_id = $2 AND state IN ('enabling', 'ready')`,
    [integrationId, memberId],
  );
  if (!engine) throw new C2CError('agent_offline');
  if (!engine.mic_ready) throw new C2CError('agent_not_ready');
  // A microphone but not ready: the window's voice connection is not up yet, and a window claims
  // calls only once ready, so an intent accepted now could wait out its 60 s and expire.
  if (engine.state !== 'ready') throw new C2CError('agent_not_ready', "The agent's call window is still connecting its voice line.");
  const [live] = await sql.query(
    `SELECT 1 FROM call_intents WHERE integration_id = $1 AND member_id = $2 AND status IN (${LIVE_STATUS_LIST}) AND ended_at IS NULL LIMIT 1`,
    [integrationId, memberId],
  );
  if (engine.busy || live) throw new C2CError('agent_busy');
  return engine;
}
