/**
 * WidgetState (spec section 2): what an agent's widgets show. Loaded from the store in one place
 * and rendered with the time-dependent fields (server_time, durations, last_seen_ago) at the
 * moment of sending, so a cached load is never stale in those fields.
 */
import { LIMITS } from '../../shared/limits.js';
import type { Realtime, WidgetState } from '../../shared/types.js';
import { seconds } from '../clock.js';
import type { Sql } from '../store/index.js';
import type { ResolvedAgent } from './agents.js';
import type { IntegrationRow } from './integrations/model.js';
import { toCall, toEngine, toWidgetAgent, type CallRow, type EngineRow } from './views.js';

export interface AgentStateData {
  version: number;
  engine: EngineRow | null;
  call: CallRow | null;
}

/** The agent's version, newest engine, and current call (the live one, else the latest). */
export async function loadAgentState(sql: Sql, integrationId: string, memberId: string): Promise<AgentStateData> {
  const [versionRow] = await sql.query<{ version: number }>(
    'SELECT version FROM agent_versions WHERE integration_id = $1 AND member_id = $2',
    [integrationId, memberId],
  );
  const [engine] = await sql.query<EngineRow>(
    `SELECT * FROM engines WHERE integration_id = $1 AND member_id = $2
     ORDER BY (state <> 'closed') DESC, created_at DESC LIMIT 1`,
    [integrationId, memberId],
  );
  const [call] = await sql.query<CallRow>(
    `SELECT * FROM call_intents WHERE integration_id = $1 AND member_id = $2
     ORDER BY (ended_at IS NULL) DESC, created_at DESC LIMIT 1`,
    [integrationId, memberId],
  );
  return { version: versionRow?.version ?? 1, engine: engine ?? null, call: call ?? null };
}

export interface RenderContext {
  integration: IntegrationRow;
  agent: ResolvedAgent;
  sessionExpiresAt: number;
  realtime: Realtime;
}

export function renderWidgetState(data: AgentStateData, context: RenderContext, nowMs: number): WidgetState {
  return {
    ok: true,
    engine: data.engine ? toEngine(data.engine, nowMs) : null,
    call: data.call ? toCall(data.call, nowMs) : null,
    policy: context.agent.effective.policy,
    agent: toWidgetAgent(context.integration, context.agent),
    version: data.version,
    server_time: seconds(nowMs),
    poll_ms: LIMITS.pollMs,
    session_expires_at: seconds(context.sessionExpiresAt),
    realtime: context.realtime,
  };
}

/**
 * The statement that bumps the WidgetState version of the agents a query of (integration_id,
 * member_id) names, returning `version`; a larger statement can bump inside itself with it.
 */
export const agentVersionBump = (agents: string) =>
  `INSERT INTO agent_versions (integration_id, member_id, version) SELECT a.i, a.m, 2 FROM (${agents}) AS a(i, m)
   ON CONFLICT (integration_id, member_id) DO UPDATE SET version = agent_versions.version + 1
   RETURNING version`;

/** Bumps and returns the agent's WidgetState version; call inside the transaction that changed it. */
export async function bumpAgentVersion(sql: Sql, integrationId: string, memberId: string): Promise<number> {
  const [row] = await sql.query<{ version: number }>(agentVersionBump('VALUES ($1::text, $2::text)'), [integrationId, memberId]);
  return row!.version;
}
