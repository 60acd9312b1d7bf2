/**
 * Provider status callbacks (ringing, answered, completed, busy, no-answer, failed, canceled)
 * applied to the intent. Forward-only: a duplicate or out-of-order callback changes nothing. The
 * answer time is the provider's (its Timestamp), and the duration is the server's from it.
 */
import type { Clock } from '../../clock.js';
import type { ProviderCallStatus } from '../../providers/provider.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import type { CallRow } from '../views.js';
import { advanceCall, finishCall } from './lifecycle.js';

export interface ProviderEvent {
  callSid: string;
  status: ProviderCallStatus;
  /** the provider's time of the event, Unix ms, when it sent one */
  timestamp: number | null;
}

export async function applyProviderEvent(db: Db, clock: Clock, call: CallRow, event: ProviderEvent): Promise<Changes> {
  const changes = new Changes();
  const now = clock.now();
  // The provider's clock decides the answer moment, but never a moment in the future or before the call.
  const eventTime = event.timestamp !== null && event.timestamp <= now && event.timestamp >= call.created_at ? event.timestamp : now;
  await db.tx(async (sql) => {
    switch (event.status) {
      case 'queued':
      case 'initiated':
        return;
      case 'ringing':
        await advanceCall(sql, changes, call.id, 'ringing', { ringing_at: eventTime, provider_leg_sid: event.callSid });
        return;
      case 'in-progress':
        await advanceCall(sql, changes, call.id, 'connected', { answered_at: eventTime, provider_leg_sid: event.callSid });
        return;
      case 'completed':
        await finishCall(sql, changes, now, call.id, {
          status: call.answered_at !== null ? 'completed' : call.hangup_requested_at !== null ? 'canceled' : 'no_answer',
          reason: call.hangup_requested_at !== null ? 'hangup' : 'far_end',
        });
        return;
      case 'busy':
        // An inbound leg that is "busy" was declined by the agent's device.
        await finishCall(sql, changes, now, call.id, call.direction === 'inbound' ? { status: 'rejected', reason: 'declined' } : { status: 'busy', reason: 'provider', error: 'busy' });
        return;
      case 'no-answer':
        await finishCall(sql, changes, now, call.id, { status: 'no_answer', reason: 'provider', error: 'no_answer' });
        return;
      case 'failed':
        await finishCall(sql, changes, now, call.id, { status: 'failed', reason: 'provider', error: 'provider_failed' });
        return;
      case 'canceled':
        // An incoming call the agent's side hung up before answering was declined.
        if (call.direction === 'inbound' && call.status === 'incoming' && call.hangup_requested_at !== null) {
          await finishCall(sql, changes, now, call.id, { status: 'rejected', reason: 'declined' });
        } else {
          await finishCall(sql, changes, now, call.id, { status: 'canceled', reason: call.hangup_requested_at !== null ? 'hangup' : 'provider' });
        }
        return;
    }
  });
  return changes;
}
