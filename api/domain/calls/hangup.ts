/**
 * Ending a call on request (widget, backend, window, or the service itself). Before a provider leg
 * exists the intent is simply canceled (if it still has none when canceled). Otherwise the provider ends the leg through its REST API;
 * only when that succeeds is the call recorded as ended, so an unreachable provider answers
 * hangup_uncertain and never a false "done". The provider's own callback for the same hangup
 * then finds the call ended and changes nothing.
 */
import { C2CError } from '../../../shared/errors.js';
import type { Clock } from '../../clock.js';
import { loadProviderAccount, ProviderUnreachable, type HangupOutcome, type Providers } from '../../providers/index.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import { isTerminal, type CallRow } from '../views.js';
import { askedEnd, endStatusFor, finishCall, passesCallerOn, type EndReason } from './lifecycle.js';
import { settleFromProviderRecord } from './provider-records.js';

export interface HangupDeps {
  db: Db;
  clock: Clock;
  providers: Providers;
}

/**
 * `byAgent`: the agent asked (the widget's or the window's hang up), not the backend or the
 * service: a call still ringing is then declined.
 */
export async function hangupCall(
  { db, clock, providers }: HangupDeps,
  callId: string,
  reason: EndReason = 'hangup',
  { byAgent = false }: { byAgent?: boolean } = {},
): Promise<{ call: CallRow; changes: Changes }> {
  const changes = new Changes();
  const read = async () => {
    const [row] = await db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1', [callId]);
    // Gone since the caller found it: only the retention pass deletes calls, and only long-ended ones.
    if (!row) throw new C2CError('not_found', 'No such call.');
    return row;
  };
  let call = await read();
  // Before a provider leg exists, cancel the intent, but only while it still has none: the voice
  // webhook may dial it between the read and the update. When the update finds the call moved on,
  // read it again; a call that gained a provider leg meanwhile is ended through the provider below.
  // Each retry means the status moved forward, so this ends within a few rounds.
  while (!isTerminal(call.status) && call.provider_call_sid === null) {
    const seen = call;
    const ended = await db.tx((sql) =>
      finishCall(sql, changes, clock.now(), seen.id, {
        status: endStatusFor(seen, reason),
        reason,
        onlyIfStill: { status: seen.status, withoutProviderCall: true },
      }),
    );
    if (ended) return { call: ended, changes };
    call = await read();
  }
  if (isTerminal(call.status)) return { call, changes };
  // A decline is decided on the state the widget was shown; a ring answered since (its answer's
  // callback landed meanwhile, or a replay of a decline whose first try failed) is a conversation:
  // ended here, the caller's leg would go (legToEnd keeps it only while the call rings).
  if (reason === 'declined' && call.status !== 'incoming') {
    // A decline tried before (its provider hangup unconfirmed) left its request on the call: the
    // answer after it shows it did not take, and the call's end is not to be read as that decline.
    await db.query(
      "UPDATE call_intents SET hangup_requested_at = NULL, hangup_reason = NULL WHERE id = $1 AND hangup_reason = 'declined' AND answered_at > hangup_requested_at",
      [call.id],
    );
    throw new C2CError('invalid_state', 'The call was answered before the decline reached it; hang up to end it.');
  }
  // An agent's hang up of a call still ringing is a decline (lifecycle.ts, askedEnd), and passes a
  // Twilio caller on like one.
  const asked: EndReason = byAgent && reason === 'hangup' && call.status === 'incoming' ? 'declined' : reason;
  const leg = legToEnd(call, asked);
  // When the provider was asked to end the call: the call ended between then and its answer, which
  // may take seconds. Ended at the answer, every hangup was billed for that wait, which nobody talked.
  let askedAt: number | undefined;

  if (leg !== null) {
    askedAt = clock.now();
    // With its reason: the provider's callback for this hangup may come first (provider-events.ts).
    // (Without a leg to end, nothing is asked of the provider, and the end below is the record.)
    await db.query('UPDATE call_intents SET hangup_requested_at = coalesce(hangup_requested_at, $2), hangup_reason = coalesce(hangup_reason, $3) WHERE id = $1', [
      call.id,
      askedAt,
      asked,
    ]);
    const account = await loadProviderAccount(db, call.account_id);
    let outcome: HangupOutcome;
    try {
      outcome = await providers.byName(call.provider).hangup(account!, leg);
    } catch (error) {
      if (error instanceof ProviderUnreachable) throw new C2CError('hangup_uncertain', undefined, { cause: error });
      throw error;
    }
    call = await read();
    if (outcome === 'ended-already' && !isTerminal(call.status)) call = await settleEndedAlready({ db, clock, providers }, call, changes);
  }
  if (!isTerminal(call.status)) {
    const seen = call;
    // With no leg ended, only as seen: a ring answered meanwhile is not declined.
    // An answered call ended when the provider was asked (no sooner than its answer). One seen
    // unanswered ends now: an answer that lands meanwhile came after the provider was asked, and
    // the talk until the end is recorded, as the provider bills it (finishCall).
    const endedAt = askedAt !== undefined && seen.answered_at !== null ? Math.max(askedAt, seen.answered_at) : undefined;
    const finish = { ...askedEnd(seen, asked), ...(leg === null ? { onlyIfStill: { status: seen.status } } : { endedAt }) };
    // The ended row as committed: a read after it that failed would leave its change unannounced.
    call = (await db.tx((sql) => finishCall(sql, changes, clock.now(), seen.id, finish))) ?? (await read());
  }
  return { call, changes };
}

/**
 * A call the provider had ended before the hangup asked (its far end hung up, and the final
 * callback is late or was lost: Twilio does not retry one answered 503), ended as the provider
 * recorded it: its end and talk time, as that callback would have. Ended at this moment instead,
 * an answered call would be billed for the time since, which nobody talked, and the callback
 * coming after would find it ended and change nothing. Where the record cannot be read, or tells
 * nothing final, the call is ended at the hang up (below): the agent asked, and waits for it.
 */
async function settleEndedAlready(deps: HangupDeps, call: CallRow, changes: Changes): Promise<CallRow> {
  try {
    // The ended row as committed: a read after it that failed would leave its change unannounced.
    return (await settleFromProviderRecord(deps, call, changes)).call ?? call;
  } catch (error) {
    if (error instanceof ProviderUnreachable) return call;
    throw error;
  }
}

/**
 * The provider leg a hangup ends: the call's (an outbound call's parent, an inbound caller's), and
 * with it every leg bridged to it. A Twilio incoming call still ringing that its agent declines, or
 * whose window went offline, keeps its caller (passesCallerOn): only the window's leg ends, and
 * Twilio asks the <Dial>'s action what follows, which rings the next agent (inbound-twilio.ts).
 * Before Twilio named that leg (its first callback), no leg: the window rejects the ring once it
 * sees the call ended, else the ring times out, and the caller goes on all the same.
 */
function legToEnd(call: CallRow, reason: EndReason): string | null {
  const keepsCaller = call.direction === 'inbound' && call.provider === 'twilio' && call.status === 'incoming' && passesCallerOn(reason);
  return keepsCaller ? call.provider_leg_sid : call.provider_call_sid;
}
