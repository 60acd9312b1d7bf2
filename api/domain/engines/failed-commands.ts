/**
 * Commands the call window could not carry out (a first ack with result `failed`). Without this,
 * the widget that sent one (an answer while the window's voice device is not up, say) would show
 * its effect ("Answering…") until it timed out, then drop it without a word. The newest such
 * command is kept with the agent's version (WidgetState.failed_command), and the bump pushes it:
 * the widget that knows its request_id reports it (`commandfailed`) and undoes the effect at once.
 * One statement, made only when a first ack failed: acks that succeed cost nothing more.
 */
import type { FailedCommand } from '../../../shared/schemas/widget-api.js';
import { seconds, type Clock } from '../../clock.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import type { FirstAck } from './acks.js';

/**
 * The end of an INSERT into agent_versions (integration_id, member_id, version, failed_command,
 * failed_command_id): the failure shown as the agent's, with a new version, unless a newer one is
 * shown already (two reports, a REST heartbeat and a socket ack, may record out of order; then
 * nothing changes). Shared with closed-commands.ts.
 */
export const SHOW_FAILED_COMMAND = `ON CONFLICT (integration_id, member_id) DO UPDATE
       SET version = agent_versions.version + 1, failed_command = excluded.failed_command, failed_command_id = excluded.failed_command_id
       WHERE agent_versions.failed_command_id IS NULL OR agent_versions.failed_command_id < excluded.failed_command_id
     RETURNING integration_id, member_id, version`;

/** What the widget shows when the window gave no reason. */
const NO_REASON = 'The call window could not carry out the command.';

export async function recordFailedCommands(db: Db, clock: Clock, agent: { integration_id: string; member_id: string }, acks: FirstAck[]): Promise<Changes> {
  const changes = new Changes();
  // The newest by command_id: the store returns a report's acks in no particular order.
  const failed = acks.filter((ack) => !ack.done).reduce<FirstAck | undefined>((newest, ack) => (newest && newest.command_id > ack.command_id ? newest : ack), undefined);
  if (!failed) return changes;
  const shown: FailedCommand = {
    request_id: failed.request_id,
    kind: failed.kind,
    error: 'command_failed',
    message: failed.error?.trim() || NO_REASON,
    failed_at: seconds(clock.now()),
  };
  const [row] = await db.query<{ version: number }>(
    `INSERT INTO agent_versions (integration_id, member_id, version, failed_command, failed_command_id) VALUES ($1, $2, 2, $3::jsonb, $4)
     ${SHOW_FAILED_COMMAND}`,
    [agent.integration_id, agent.member_id, JSON.stringify(shown), failed.command_id],
  );
  return row ? changes.agentTouched(agent.integration_id, agent.member_id, Number(row.version)) : changes;
}
