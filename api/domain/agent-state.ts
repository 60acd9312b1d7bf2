/**
 * WidgetState (spec section 2): what an agent's widgets show. Loaded from the store in one place
 * and rendered with the time-dependent fields (server_time, durations, last_seen_ago) at the
 * moment of sending, so a cached load is never stale in those fields.
 */
import { LIMITS } from '../../shared/limits.js';
import type { Realtime, WidgetState } from '../../shared/types.js';
import type { FailedCommand } from '../../shared/schemas/widget-api.js';
import { seconds } from '../clock.js';
import { batchRows } from '../store/batch-rows.js';
import type { Sql } from '../store/index.js';
import type { ResolvedAgent } from './agents.js';
import type { IntegrationRow } from './integrations/model.js';
import { callJson, engineJson, toCall, toEngine, toWidgetAgent, type CallRow, type EngineRow } from './views.js';

export interface AgentStateData {
  version: number;
  engine: EngineRow | null;
  call: CallRow | null;
  failedCommand: FailedCommand | null;
}

/**
 * Agents' version, engine (the open one, else the newest) and call (the unended one, else the
 * newest), for many agents in one statement; each read is one index entry (migration 005).
 */
export async function loadAgentStates(sql: Sql, agents: Array<{ integrationId: string; memberId: string }>): Promise<AgentStateData[]> {
  const input = batchRows('a', [
    ['i', 'text', agents.map((a) => a.integrationId)],
    ['m', 'text', agents.map((a) => a.memberId)],
  ]);
  const rows = await sql.query<{ version: number | null; failed_command: FailedCommand | null; engine: EngineRow | null; call: CallRow | null }>(
    `SELECT
       v.version, v.failed_command,
       coalesce(
         (SELECT ${engineJson('e')} FROM engines e WHERE e.integration_id = a.i AND e.member_id = a.m AND e.state <> 'closed'),
         (SELECT ${engineJson('e')} FROM engines e WHERE e.integration_id = a.i AND e.member_id = a.m ORDER BY e.created_at DESC LIMIT 1)
       ) AS engine,
       coalesce(
         (SELECT ${callJson('c')} FROM call_intents c WHERE c.integration_id = a.i AND c.member_id = a.m AND c.ended_at IS NULL
            ORDER BY c.created_at DESC LIMIT 1),
         (SELECT ${callJson('c')} FROM call_intents c WHERE c.integration_id = a.i AND c.member_id = a.m ORDER BY c.created_at DESC LIMIT 1)
       ) AS call
     FROM ${input.from} LEFT JOIN agent_versions v ON v.integration_id = a.i AND v.member_id = a.m ORDER BY a.n`,
    input.params,
  );
  return rows.map((row) => ({ version: row.version ?? 1, engine: row.engine ?? null, call: row.call ?? null, failedCommand: row.failed_command ?? null }));
}

/** The agents' WidgetState versions as the store has them now: what tells whether a state made before is still current. */
export async function loadAgentVersions(sql: Sql, agents: Array<{ integrationId: string; memberId: string }>): Promise<number[]> {
  const input = batchRows('a', [
    ['i', 'text', agents.map((a) => a.integrationId)],
    ['m', 'text', agents.map((a) => a.memberId)],
  ]);
  const rows = await sql.query<{ version: number | null }>(
    `SELECT v.version FROM ${input.from} LEFT JOIN agent_versions v ON v.integration_id = a.i AND v.member_id = a.m ORDER BY a.n`,
    input.params,
  );
  return rows.map((row) => row.version ?? 1);
}

/** One agent's state (loadAgentStates). */
export async function loadAgentState(sql: Sql, integrationId: string, memberId: string): Promise<AgentStateData> {
  return (await loadAgentStates(sql, [{ integrationId, memberId }]))[0]!;
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
    failed_command: data.failedCommand,
  };
}

/**
 * The statement that bumps the WidgetState version of the agents a query of (integration_id,
 * member_id) names, returning each one's new `version`; a larger statement can bump inside itself
 * with it. Rows are taken in key order, so two statements bumping the same agents never deadlock.
 */
export const agentVersionBump = (agents: string) =>
  `INSERT INTO agent_versions (integration_id, member_id, version) SELECT a.i, a.m, 2 FROM (${agents}) AS a(i, m) ORDER BY a.i, a.m
   ON CONFLICT (integration_id, member_id) DO UPDATE SET version = agent_versions.version + 1
   RETURNING integration_id, member_id, version`;

/** Bumps and returns the agent's WidgetState version; call inside the transaction that changed it. */
export async function bumpAgentVersion(sql: Sql, integrationId: string, memberId: string): Promise<number> {
  const [row] = await sql.query<{ version: number }>(agentVersionBump('VALUES ($1::text, $2::text)'), [integrationId, memberId]);
  return row!.version;
}
