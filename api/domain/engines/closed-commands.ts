/**
 * Commands left for a call window as it closes (closed, replaced, revoked). A closed window never
 * heartbeats again, so nothing would hand them over or ack them: they stayed `queued` for ever,
 * and the widget that sent one (an Answer clicked as the window closed) showed its effect until it
 * timed out, then dropped it without a word. They fail with the window, in the statement that
 * closes it, and the newest of each agent's is shown as the agent's failed command, as a window's
 * own failure is (failed-commands.ts): the widget that sent it says why and undoes the effect.
 * A `focus` fails without a word: it asked the window to come to the front, and the agent's next
 * window (the likeliest reason this one closed: Enable calls clicked again replaces it) is
 * brought up anyway. The reason is the service's, in English: the window's own are in its language.
 * A command recorded for a window just after it closed (decided on a state cached a moment
 * before) is failed by the reaper's sweep (reaper.ts, failLeftForClosedWindows).
 */
import type { FailedCommand } from '../../../shared/schemas/widget-api.js';
import { seconds } from '../../clock.js';
import type { Sql } from '../../store/index.js';
import type { Changes } from '../changes.js';
import { SHOW_FAILED_COMMAND } from './failed-commands.js';

/** The reason a widget shows for a command its window closed before carrying out. */
export const WINDOW_CLOSED = 'The call window closed before it could carry this out.';

export async function failCommandsOfClosedWindows(sql: Sql, changes: Changes, now: number, engineIds: string[]): Promise<void> {
  if (engineIds.length === 0) return;
  const shown: Omit<FailedCommand, 'request_id' | 'kind'> = { error: 'command_failed', message: WINDOW_CLOSED, failed_at: seconds(now) };
  // The newest failed command of each agent is shown as its failed_command (failed-commands.ts).
  const bumped = await sql.query<{ integration_id: string; member_id: string; version: number | string }>(
    `WITH failed AS (
       UPDATE widget_commands SET status = 'failed', error = $2, done_at = $3
       WHERE engine_id = ANY($1::text[]) AND status IN ('queued', 'delivered')
       RETURNING id, integration_id, member_id, request_id, kind
     ), newest AS (
       SELECT DISTINCT ON (integration_id, member_id) * FROM failed WHERE kind <> 'focus' ORDER BY integration_id, member_id, id DESC
     )
     INSERT INTO agent_versions (integration_id, member_id, version, failed_command, failed_command_id)
     SELECT integration_id, member_id, 2, $4::jsonb || jsonb_build_object('request_id', request_id, 'kind', kind), id FROM newest
     ${SHOW_FAILED_COMMAND}`,
    [engineIds, WINDOW_CLOSED, now, JSON.stringify(shown)],
  );
  for (const row of bumped) changes.agentTouched(row.integration_id, row.member_id, Number(row.version));
}
