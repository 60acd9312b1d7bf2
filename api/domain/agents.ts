/**
 * Agent resolution (spec section 1): an identifier selects an existing, enabled member that the
 * integration covers, and never creates one. Checks run in this order, each with its code:
 * identifier_mode → agent_unknown / agent_ambiguous → agent_not_assigned → agent_disabled.
 */
import { hash } from 'node:crypto';
import { C2CError } from '../../shared/errors.js';
import type { AgentRef } from '../../shared/types.js';
import { batchRows } from '../store/batch-rows.js';
import type { Sql } from '../store/index.js';
import {
  effectivePolicy,
  isCovered,
  type EffectivePolicy,
  type IntegrationRow,
  type MemberLink,
  type MemberRow,
} from './integrations/model.js';

export interface ResolvedAgent {
  member: MemberRow;
  link: MemberLink | null;
  effective: EffectivePolicy;
  /** how the integrator names this member: the e-mail, or in uuid mode its mapped or stable UUID */
  identifier: string;
  /**
   * A digest of what widgets are shown of the agent (its policy, name, identifier and department),
   * made once per load: part of the WidgetState's ETag (api/domain/widget-states.ts), since a node
   * that has not yet heard of a change to these can render them old under a new version.
   */
  shown: string;
}

const MEMBER_COLUMNS = `m.id, m.account_id, m.email, m.uuid::text AS uuid, m.name, m.enabled, m.removed,
  m.department_id, d.name AS department_name, m.created_at`;

/**
 * The member, with what coverage needs read in the same statement: its link to the integration
 * (parameter `integration`) and the integration's departments (for department coverage). A
 * reconnect storm or a burst of POST /sessions then costs one round trip per agent, not three.
 */
const memberWithCoverage = (integration: string) => `SELECT ${MEMBER_COLUMNS},
    (SELECT row_to_json(l) FROM (SELECT selected, integrator_uuid, overrides FROM integration_members
       WHERE integration_id = ${integration} AND member_id = m.id) l) AS link,
    (SELECT coalesce(json_agg(department_id), '[]') FROM integration_departments WHERE integration_id = ${integration}) AS department_ids
  FROM members m LEFT JOIN departments d ON d.id = m.department_id`;

type MemberWithCoverage = MemberRow & { link: MemberLink | null; department_ids: string[] };

/** Finds the member an identifier names and checks coverage and enablement. */
export async function resolveAgent(sql: Sql, integration: IntegrationRow, agent: AgentRef): Promise<ResolvedAgent> {
  if (agent.type !== integration.identifier_mode) {
    throw new C2CError('identifier_mode', `This integration identifies agents by ${integration.identifier_mode}, not ${agent.type}.`);
  }
  const value = agent.value.trim();
  const candidates =
    agent.type === 'email'
      ? await sql.query<MemberWithCoverage>(
          `${memberWithCoverage('$3')} WHERE m.account_id = $1 AND lower(m.email) = lower($2) AND NOT m.removed`,
          [integration.account_id, value, integration.id],
        )
      : await sql.query<MemberWithCoverage>(
          `${memberWithCoverage('$3')} WHERE m.account_id = $1 AND NOT m.removed AND (
             m.uuid::text = lower($2)
             OR m.id IN (SELECT member_id FROM integration_members
                         WHERE integration_id = $3 AND lower(integrator_uuid) = lower($2)))`,
          [integration.account_id, value, integration.id],
        );
  if (candidates.length === 0) throw new C2CError('agent_unknown');
  if (candidates.length > 1) throw new C2CError('agent_ambiguous');
  return checkAgent(integration, candidates[0]!);
}

/** Re-checks a known member (widget and engine requests): coverage and enablement apply on the next request. */
export async function reloadAgent(sql: Sql, integration: IntegrationRow, memberId: string): Promise<ResolvedAgent> {
  const [agent] = await reloadAgents(sql, [{ integration, memberId }]);
  if (agent instanceof C2CError) throw agent;
  return agent!;
}

/**
 * Re-checks many known members, each for its integration, in one statement (a gateway that just
 * restarted checks thousands at once). Each gets its agent, or the refusal that reloadAgent throws.
 *
 * A known member comes from a credential (widget token, launch ticket, engine token). One whose
 * member was removed, or never was this account's, is a credential that no longer stands: 401
 * `unauthorized`, as for any credential that no longer works (widget/state and engine/pair list
 * 401; README "statuses beyond an endpoint's list"), not `agent_unknown`, whose 404 is the answer
 * to an identifier looked up at POST /sessions and POST /calls. A removed member stays removed, so
 * the refusal is final either way.
 */
export async function reloadAgents(sql: Sql, wanted: Array<{ integration: IntegrationRow; memberId: string }>): Promise<Array<ResolvedAgent | C2CError>> {
  const input = batchRows('i', [
    ['member_id', 'text', wanted.map((w) => w.memberId)],
    ['account_id', 'text', wanted.map((w) => w.integration.account_id)],
    ['integration_id', 'text', wanted.map((w) => w.integration.id)],
  ]);
  const rows = await sql.query<Partial<MemberWithCoverage>>(
    `SELECT x.* FROM ${input.from}
     LEFT JOIN LATERAL (${memberWithCoverage('i.integration_id')} WHERE m.id = i.member_id AND m.account_id = i.account_id AND NOT m.removed) x ON true
     ORDER BY i.n`,
    input.params,
  );
  return wanted.map(({ integration }, index) => {
    const row = rows[index];
    if (!row?.id) return new C2CError('unauthorized', 'The member this credential was issued for is no longer in the account.');
    try {
      return checkAgent(integration, row as MemberWithCoverage);
    } catch (error) {
      if (error instanceof C2CError) return error;
      throw error;
    }
  });
}

function checkAgent(integration: IntegrationRow, row: MemberWithCoverage): ResolvedAgent {
  const { link, department_ids: departmentIds, ...member } = row;
  if (!isCovered(integration, member, link ?? null, departmentIds)) throw new C2CError('agent_not_assigned');
  const effective = effectivePolicy(integration, link ?? null);
  if (!member.enabled || !effective.callsEnabled) throw new C2CError('agent_disabled');
  const identifier = integration.identifier_mode === 'email' ? member.email : (link?.integrator_uuid ?? member.uuid);
  const shown = hash('sha1', JSON.stringify([effective.policy, member.name, identifier, integration.identifier_mode, member.department_name]), 'base64url').slice(0, 10);
  return { member, link: link ?? null, effective, identifier, shown };
}
