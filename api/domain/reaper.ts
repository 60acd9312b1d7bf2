/**
 * The time-driven rules (spec sections 3 and 8), run every second on every API node against the
 * injectable clock; each rule is a conditional update, so nodes running it together do it once,
 * and what each rule changed is announced as soon as it is done.
 * - a queued intent expires after 60 s;
 * - an engine silent for 30 s no longer holds its calls (orphaned);
 * - an engine silent for 90 s is offline, and its calls are ended through the provider (one whose
 *   socket dropped is offline sooner, unless on a call: engines/dropped.ts), a hundred a tick, four
 *   at a time, asked again with a backoff kept on the call (shared by the nodes) while the provider
 *   cannot be reached;
 * - a claimed intent whose provider leg never started fails after 60 s;
 * - a live call its window let go of 30 s ago is settled from the provider's record of it, in case
 *   its final callback was lost (settleUnheld; calls/provider-records.ts);
 * - a call whose final provider callback is overdue by 30 s is settled from the provider's record,
 *   else hung up through the provider and ended: inbound unanswered past its ring window, outbound
 *   ringing for 30 s (unless its window still holds it: then its answer was lost), answered past
 *   its time limit (endOverdue);
 * - the rules on silent engines wait while the store fails and for a grace after it answers again
 *   (LIMITS.storeRecoveryGraceSeconds): a window cannot report to a store that does not answer, so
 *   an outage of 90 s must not end every call when the store comes back;
 * - once a minute, widget command records older than COMMAND_RETENTION_DAYS go, and once an hour,
 *   widget tokens and launch tickets dead for a day (retention.ts).
 */
import { LIMITS } from '../../shared/limits.js';
import type { Bus } from '../bus/index.js';
import type { Clock, Timer } from '../clock.js';
import type { Providers } from '../providers/index.js';
import type { Db } from '../store/index.js';
import { Changes } from './changes.js';
import { agentVersionBump } from './agent-state.js';
import { ON_ENGINE_STATUS_LIST } from './calls/checks.js';
import { hangupCall } from './calls/hangup.js';
import { endStatusFor, finishCall } from './calls/lifecycle.js';
import { RECORDED_LEG_SQL, recordedLeg, settleFromProviderRecord, type Settled } from './calls/provider-records.js';
import { loadProviderAccount, ProviderUnreachable } from '../providers/index.js';
import { FINAL_CALL_STATUSES } from '../providers/provider.js';
import { failCommandsOfClosedWindows } from './engines/closed-commands.js';
import { PRUNE_CREDENTIALS_BACKLOG_MS, PRUNE_CREDENTIALS_EVERY_MS, PRUNE_EVERY_MS, pruneCalls, pruneCommands, pruneDeadCredentials } from './retention.js';
import type { CallRow } from './views.js';

/**
 * decided (the spec names none): how long an outbound call may ring. The dial TwiML sets no
 * timeout, so the provider's own applies: Twilio's <Dial> default of 30 s.
 */
export const RING_TIMEOUT_SECONDS = 30;
/**
 * decided: how long past the moment the provider ends a call (ring timeout, time limit, inbound ring
 * window) its final callback may still arrive before the reaper ends the call itself; covers the
 * provider's own lag and a retried callback.
 */
export const PROVIDER_FINAL_CALLBACK_GRACE_SECONDS = 30;

/**
 * decided: a call of an offline engine whose provider hangup failed (the provider unreachable) is
 * asked again 2 s later, then doubling up to every 60 s, whichever API node asks: every tick of
 * every node asking the provider each second for each such call is what a provider outage does
 * not need. The wait is kept on the call (abandoned_retry_at), which is also the claim that keeps
 * two nodes from asking at once.
 */
export const ABANDONED_HANGUP_RETRY = { firstMs: 2_000, maxMs: 60_000 } as const;
/**
 * decided: the calls one tick asks the provider about (to end those of silent windows, for the
 * record of those their windows let go of), and how many at a time. An office that loses its link
 * leaves hundreds at once: one after another, each a provider round trip, they would hold up the
 * tick's other rules for minutes; the rest go on the next ticks.
 */
export const PROVIDER_CALLS_PER_TICK = 100;
/** How long after a window closed a command recorded for it may still turn up (decided on a state cached up to a minute). */
export const CLOSED_COMMANDS_SWEPT_FOR_MS = 2 * 60 * 1000;
export const PROVIDER_REQUESTS_AT_ONCE = 4;
/** The passes a rule makes over due calls in one tick at most (inPasses). */
const MAX_PASSES = 10;
/**
 * decided: the provider's record of a live call is read once a minute at most: after a first read
 * PROVIDER_FINAL_CALLBACK_GRACE_SECONDS after its window let go of it, again while the provider
 * says its leg still runs (a device's leg outlives a closed window until the provider notices);
 * and an overdue call's record is not read again within a minute of the last read.
 */
export const PROVIDER_RECHECK_SECONDS = 60;
/**
 * decided: how long an overdue call with a provider record to read waits for a read that
 * succeeds (the provider down, or refusing its account) before the reaper ends it by its own
 * rules all the same: a provider that stays unreachable must not keep calls, and their agents, on
 * for hours; five minutes of calls ended a little late cost less than ending a talking call.
 */
export const PROVIDER_RECORD_PATIENCE_SECONDS = 300;
/**
 * How long a node's claim on such a call holds before another may ask: longer than a provider
 * request may take (a provider timing out must not let a second node ask beside it). A node that
 * dies holding one leaves it to the others after this. The backoff starts over for a call
 * abandoned again long after its last attempt (its window came back meanwhile).
 */
export const ABANDONED_CLAIM_MS = 30_000;

export interface ReaperDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  providers: Providers;
  /** COMMAND_RETENTION_DAYS in ms; undefined keeps every command record */
  commandRetentionMs?: number;
  /** CALL_RETENTION_DAYS in ms; undefined keeps every call record */
  callRetentionMs?: number;
  /** the calls a tick asks the provider about (PROVIDER_CALLS_PER_TICK; a test gives fewer) */
  providerCallsPerTick?: number;
  log?: (message: string, error?: unknown) => void;
}

export function createReaper(deps: ReaperDeps) {
  const { db, bus, clock } = deps;
  const callsPerTick = deps.providerCallsPerTick ?? PROVIDER_CALLS_PER_TICK;
  let timer: Timer | undefined;
  let running: Promise<void> | undefined;
  let prunedAt = -Infinity;
  let credentialsDueAt = -Infinity;
  /** calls the provider's record ended while live in the store (/metrics) */
  let settledByRecords = 0;
  /**
   * Where a read of the provider's records failed in this tick (readRecord): the provider (no more
   * reads in the tick), or accounts it refused (no more reads of their calls).
   */
  let unreachable = { provider: false, accounts: new Set<string>() };
  const readsHeld = (accountId: string) => unreachable.provider || unreachable.accounts.has(accountId);
  /**
   * Notes a provider found unreachable by a read or a hangup (the account alone, where it refused
   * that account): the tick asks it nothing more, since each request would wait out its timeout.
   */
  const noteUnreachable = (error: unknown, accountId: string) => {
    const cause = error instanceof ProviderUnreachable ? error : error instanceof Error && error.cause instanceof ProviderUnreachable ? error.cause : null;
    if (!cause) return;
    if (cause.accountOnly) unreachable.accounts.add(accountId);
    else unreachable.provider = true;
  };
  let storeFailures = db.unavailableCount();
  let storeFailedAt = -Infinity;
  /** when this reaper first ran without judging silence, in the current run of such ticks */
  let unjudgedSince: number | undefined;
  /**
   * A node just started cannot tell whether the store has just come back (a node restarted during
   * an outage, up as soon as PostgreSQL answers): it judges no silence for the grace either, by
   * when every window has been able to report. The nodes that lived through the outage hold off
   * too; one judging alone would end the calls of every window the outage silenced.
   */
  const startedAt = clock.now();

  /**
   * Whether windows' silence may be judged now: the store has answered for the whole grace, or
   * the reaper has put judging off for as long as it may (a store failing now and then).
   */
  function silenceJudgeable(now: number): boolean {
    const failures = db.unavailableCount();
    if (failures !== storeFailures) {
      storeFailures = failures;
      storeFailedAt = now;
    }
    if (now - startedAt < LIMITS.storeRecoveryGraceSeconds * 1000) return false;
    if (now - storeFailedAt >= LIMITS.storeRecoveryGraceSeconds * 1000) {
      unjudgedSince = undefined;
      return true;
    }
    if (unjudgedSince === undefined) {
      unjudgedSince = now;
      deps.log?.(`the store failed statements: silent windows are not judged until it has answered for ${LIMITS.storeRecoveryGraceSeconds} s`);
    }
    if (now - unjudgedSince < LIMITS.storeTroubleMaxSeconds * 1000) return false;
    deps.log?.(`the store has kept failing statements for ${LIMITS.storeTroubleMaxSeconds} s: silent windows are judged again`);
    unjudgedSince = now; // and again after as long, while the failures go on
    return true;
  }

  async function expireQueued(changes: Changes, now: number) {
    const due = await db.query<{ id: string }>(`SELECT id FROM call_intents WHERE status = 'queued' AND expires_at <= $1`, [now]);
    for (const { id } of due) {
      // still queued: an engine may have claimed it since the select
      const onlyIfStill = { status: 'queued', withoutProviderCall: true } as const;
      await db.tx((sql) => finishCall(sql, changes, now, id, { status: 'expired', reason: 'expired', error: 'expired', onlyIfStill }));
    }
  }

  // These two take their rows in key order, as heartbeat batches do (engines by id, agents'
  // versions in key order: agentVersionBump), so an office whose windows come back as they are
  // judged never deadlocks with them.

  async function orphanStale(changes: Changes, now: number) {
    const bumped = await db.query<{ integration_id: string; member_id: string; version: number }>(
      `WITH due AS (
         SELECT c.id FROM call_intents c JOIN engines e ON e.id = c.engine_id
         WHERE c.status IN (${ON_ENGINE_STATUS_LIST}) AND NOT c.orphaned AND e.last_seen_at <= $1 ORDER BY c.id FOR NO KEY UPDATE OF c
       ), orphaned AS (
         UPDATE call_intents c SET orphaned = true, orphaned_at = coalesce(c.orphaned_at, $2) FROM due WHERE c.id = due.id RETURNING c.integration_id, c.member_id
       ) ${agentVersionBump('SELECT DISTINCT integration_id, member_id FROM orphaned')}`,
      [now - LIMITS.engineStaleSeconds * 1000, now],
    );
    for (const row of bumped) changes.agentTouched(row.integration_id, row.member_id, row.version);
  }

  async function markOffline(changes: Changes, now: number) {
    const bumped = await db.query<{ integration_id: string; member_id: string; version: number }>(
      `WITH due AS (
         SELECT id FROM engines WHERE state IN ('enabling', 'ready') AND last_seen_at <= $1 ORDER BY id FOR NO KEY UPDATE
       ), offline AS (
         UPDATE engines e SET state = 'offline', version = e.version + 1 FROM due WHERE e.id = due.id RETURNING e.integration_id, e.member_id
       ) ${agentVersionBump('SELECT DISTINCT integration_id, member_id FROM offline')}`,
      [now - LIMITS.engineOfflineAfterSeconds * 1000],
    );
    for (const row of bumped) changes.agentTouched(row.integration_id, row.member_id, row.version);
  }

  /**
   * Runs `each` over the calls `select` finds due, PROVIDER_REQUESTS_AT_ONCE at a time, in passes
   * of PROVIDER_CALLS_PER_TICK calls in all. A call of an account the provider stopped answering
   * this tick (a 4xx refused that account) is skipped, and the places such calls took go to other
   * accounts' calls in another pass (`select` leaves the held accounts out), so that one account's
   * hundreds of calls never keep every other account's waiting. The provider failing outright (a
   * 5xx, no answer) ends it for the tick. Each pass asks about fewer calls than the last.
   */
  async function inPasses<T extends { account_id: string }>(
    select: (places: number, heldAccounts: string[], providerDown: boolean) => Promise<T[]>,
    each: (call: T) => Promise<void | 'held'>,
    { heldDecidedByEach = false } = {},
  ) {
    let places = callsPerTick;
    // (A pass that skips calls has held a new account, which the next leaves out: the bound on
    // passes only guards against a select that did not.)
    for (let pass = 0; pass < MAX_PASSES && places > 0; pass += 1) {
      // The provider failing outright ends the passes for the tick; but where `each` decides about
      // held calls, the passes go on (their select then leaves out every call that needs an answer
      // from the provider): they end the calls that need none.
      if (unreachable.provider && !heldDecidedByEach) return;
      const due = await select(places, [...unreachable.accounts], unreachable.provider);
      let skipped = 0;
      await inParallel(due, PROVIDER_REQUESTS_AT_ONCE, async (call) => {
        // The provider did not answer this tick: the call waits for the next tick, rather than hold
        // up the tick's other rules (queued intents expiring, windows going offline) for a timeout.
        // (Unless `each` decides, saying 'held' where it left a call for that reason.)
        if (!heldDecidedByEach && readsHeld(call.account_id)) return void (skipped += 1);
        if ((await each(call)) === 'held') skipped += 1;
      });
      if (due.length < places || skipped === 0) return;
      places = skipped;
    }
  }

  /** Calls on engines silent for 90 s (offline or closed) end deliberately, through the provider. */
  async function endAbandoned(changes: Changes, now: number) {
    await inPasses(
      (places, held) =>
        db.query<{ id: string; account_id: string }>(
          `SELECT c.id, c.account_id FROM call_intents c JOIN engines e ON e.id = c.engine_id
           WHERE c.status IN (${ON_ENGINE_STATUS_LIST}) AND e.last_seen_at <= $1 AND (c.abandoned_retry_at IS NULL OR c.abandoned_retry_at <= $2)
             AND NOT (c.account_id = ANY($4::text[]))
           ORDER BY c.created_at LIMIT $3`,
          [now - LIMITS.engineOfflineAfterSeconds * 1000, now, places, held],
        ),
      ({ id, account_id }) => endAbandonedCall(changes, id, account_id),
    );
  }

  async function endAbandonedCall(changes: Changes, id: string, accountId: string) {
    try {
      // Claimed for this attempt, at the time it is made (a batch takes a while): another node
      // ticking meanwhile finds it claimed for as long as a provider request may take.
      const claimedAt = clock.now();
      const [claimed] = await db.query<{ abandoned_retry_ms: number }>(
        `UPDATE call_intents SET abandoned_retry_at = $2::bigint + $3::bigint,
           abandoned_retry_ms = CASE WHEN abandoned_retry_ms IS NULL OR abandoned_retry_at < $2::bigint - $5::bigint * 2 THEN $4::integer
                                     ELSE LEAST(abandoned_retry_ms * 2, $5::integer) END
         WHERE id = $1 AND status IN (${ON_ENGINE_STATUS_LIST}) AND (abandoned_retry_at IS NULL OR abandoned_retry_at <= $2::bigint)
         RETURNING abandoned_retry_ms`,
        [id, claimedAt, ABANDONED_CLAIM_MS, ABANDONED_HANGUP_RETRY.firstMs, ABANDONED_HANGUP_RETRY.maxMs],
      );
      if (!claimed) return;
      try {
        changes.merge((await hangupCall(deps, id, 'engine_offline')).changes);
      } catch (error) {
        // The provider is unreachable (or the call was deleted meanwhile): asked again after the wait, from now.
        noteUnreachable(error, accountId);
        await db.query('UPDATE call_intents SET abandoned_retry_at = $2::bigint WHERE id = $1', [id, clock.now() + claimed.abandoned_retry_ms]);
        deps.log?.(`could not end call ${id} of an offline engine; asking again in ${claimed.abandoned_retry_ms / 1000} s`, error);
      }
    } catch (error) {
      // the store failed this one: the others go on, and it is due again on a later tick
      deps.log?.(`could not claim call ${id} of an offline engine`, error);
    }
  }

  /**
   * Commands recorded for a window just after it closed (decided on a state cached a moment before
   * its closing was heard of): the statement that closed it could not see them, and the window
   * will never take them. Failed as those it saw were (engines/closed-commands.ts). Pending
   * commands are few (a window acks within moments), and their index is partial: a small read.
   * Only windows closed within CLOSED_COMMANDS_SWEPT_FOR_MS: a command is decided on a state
   * cached a minute at most. (Those left by releases before this one, closed long ago, stay as
   * they were: failed now, each would be pushed to its agent's widgets as news.)
   */
  async function failLeftForClosedWindows(changes: Changes, now: number) {
    const closed = await db.query<{ engine_id: string }>(
      `SELECT DISTINCT c.engine_id FROM widget_commands c JOIN engines e ON e.id = c.engine_id
       WHERE c.status IN ('queued', 'delivered') AND e.state = 'closed' AND e.closed_at >= $2 LIMIT $1`,
      [PROVIDER_CALLS_PER_TICK, now - CLOSED_COMMANDS_SWEPT_FOR_MS],
    );
    if (closed.length > 0) await db.tx((sql) => failCommandsOfClosedWindows(sql, changes, now, closed.map((row) => row.engine_id)));
  }

  async function failUnconnected(changes: Changes, now: number) {
    const stuck = await db.query<{ id: string }>(
      `SELECT id FROM call_intents WHERE status = 'claimed' AND provider_call_sid IS NULL AND claimed_at <= $1`,
      [now - LIMITS.claimConnectTimeoutSeconds * 1000],
    );
    for (const { id } of stuck) {
      // still claimed with no provider call: the browser's connect may have landed since the select,
      // and a call the voice webhook dialed is no connect timeout (its own rules end it)
      const onlyIfStill = { status: 'claimed', withoutProviderCall: true } as const;
      await db.tx((sql) => finishCall(sql, changes, now, id, { status: 'failed', reason: 'connect_timeout', error: 'connect_timeout', onlyIfStill }));
    }
  }

  /**
   * Claims a read of a call's provider record for this node, PROVIDER_RECHECK_SECONDS after the
   * last one at the earliest: the call as claimed, or nothing when another node has just read it,
   * or it has ended.
   */
  async function claimRecordRead(id: string): Promise<CallRow | undefined> {
    const [call] = await db.query<CallRow>(
      `UPDATE call_intents SET provider_read_at = $2::bigint
       WHERE id = $1 AND ended_at IS NULL AND (provider_read_at IS NULL OR provider_read_at <= $2::bigint - $3::bigint)
       RETURNING *`,
      [id, clock.now(), PROVIDER_RECHECK_SECONDS * 1000],
    );
    return call;
  }

  /**
   * Reads the provider's record of a claimed call and applies what it tells; null when it could
   * not be read (logged). Once the provider could not be reached, the tick starts no more reads (of
   * that account's calls, where the provider refused the account alone): a provider down must not
   * hold up the tick's other rules for a timeout per call.
   */
  async function readRecord(call: CallRow, changes: Changes, why: string): Promise<Settled | null> {
    try {
      const settled = await settleFromProviderRecord(deps, call, changes);
      if (settled.ended) settledByRecords += 1;
      if (settled.ended || settled.answered) {
        const what = settled.ended ? `settled from the provider's record (${settled.record!.status}): its final callback` : "answered, as the provider's record says: its answer's callback";
        deps.log?.(`call ${call.id} (${why}) ${what} had not come`);
      }
      return settled;
    } catch (error) {
      noteUnreachable(error, call.account_id);
      deps.log?.(`could not read the provider's record of call ${call.id} (${why}); read again in ${PROVIDER_RECHECK_SECONDS} s`, error);
      return null;
    }
  }

  /**
   * Live calls their windows no longer hold (orphaned): the window's device let go of its leg, so
   * the provider has ended it or soon will, and its final callback should come. If it was lost,
   * the provider's record settles the call now, not its time limit hours later
   * (calls/provider-records.ts). The first read comes PROVIDER_FINAL_CALLBACK_GRACE_SECONDS after
   * the window let go (orphaned_at: a hang up's callback comes within seconds, and is not to be
   * raced), then one every PROVIDER_RECHECK_SECONDS while the leg runs; the time of the last read,
   * kept on the call, keeps nodes ticking together from reading twice. A window that holds the
   * call again clears both.
   */
  async function settleUnheld(changes: Changes, now: number) {
    await inPasses(
      (places, held) =>
        // orphaned_at is null only for a call orphaned by a node on older code: read at once
        db.query<{ id: string; account_id: string }>(
          `SELECT id, account_id FROM call_intents
           WHERE status IN (${PROVIDER_LEG_STATUS_LIST}) AND orphaned AND ${RECORDED_LEG_SQL}
             AND (orphaned_at IS NULL OR orphaned_at <= $1) AND (provider_read_at IS NULL OR provider_read_at <= $2)
             AND NOT (account_id = ANY($4::text[]))
           ORDER BY created_at LIMIT $3`,
          [now - PROVIDER_FINAL_CALLBACK_GRACE_SECONDS * 1000, now - PROVIDER_RECHECK_SECONDS * 1000, places, held],
        ),
      async ({ id }) => {
        try {
          const call = await claimRecordRead(id);
          if (call?.orphaned) await readRecord(call, changes, 'its window let go of it');
        } catch (error) {
          deps.log?.(`could not claim the read of call ${id}'s provider record`, error);
        }
      },
    );
  }

  /**
   * Calls the provider should have ended by now, but whose final callback never came (lost after
   * the provider's retries, a provider-side outage) while their window keeps heartbeating, so the
   * silent-engine rules never fire. The provider's record of each is read first, where the call
   * has a leg to read (calls/provider-records.ts): one saying the leg ended settles the call, with
   * the provider's own end and talk time, and one saying it is in progress answers a call still
   * recorded unanswered. Only the node that read the record goes on; a record that could not be
   * read is read again a minute later, for PROVIDER_RECORD_PATIENCE_SECONDS at most. Any call the
   * record did not settle is then ended, and hung up through the provider (a leg already gone is a
   * no-op there):
   * - an inbound call still `incoming` after its ring window (expires_at) is `no_answer`;
   * - an outbound call `dialing` or `ringing` RING_TIMEOUT_SECONDS after it was dialed, plus the
   *   grace, is `no_answer`;
   * - an answered call past its provider time limit (an inbound one's is its policy's
   *   max_call_seconds; a call without one, the platform cap), plus the grace, is `completed`,
   *   billed for the time limit at most (lifecycle.ts), and ended at that limit.
   * An unanswered call its window still holds (not `orphaned`: it reports the call as its own) is
   * not rung out on the clock: the window's device still has its leg, which the provider would have
   * ended at the ring's end, so the far end answered and the lost callback was that answer. Hanging
   * up would cut the conversation (and the window drops its leg once the call reads as ended). It is
   * ended once the window lets go of it, or past the time limit as an answered call would be. An
   * incoming ring is the exception: a window reports the call the service lists as its ring whether
   * or not its device was ever rung (the caller hung up before the <Dial> ran; a store outage lost
   * the ring's every callback and its action), and such a ring would keep its agent busy for the
   * call's whole time limit (an hour). Past its ring window it is rung out, held or not, once a
   * record read then shows its leg ended, or lists no leg of it under the caller's (ringGone);
   * answered, the record answers it. A held ring whose record cannot be read, or whose own leg the
   * provider does not know, is left as it is.
   * A hundred a tick, four at a time, in passes as for silent windows' calls: a call of an account
   * the provider stopped answering this tick (of any account, when it stopped answering at all),
   * still within its patience, gives its place to another call (one account's hundreds of calls,
   * its credentials refused, kept every other account's overdue calls waiting, their agents busy
   * and their wallets' shares held; the provider down, calls past their patience waited behind
   * older ones within theirs).
   */
  async function endOverdue(changes: Changes, now: number) {
    const grace = PROVIDER_FINAL_CALLBACK_GRACE_SECONDS * 1000;
    const select = (places: number, held: string[], providerDown: boolean) =>
      // overdue_at: when the call became overdue (the earliest condition it meets); past_limit: by its time limit
      db.query<CallRow & { overdue_at: string | number; past_limit: boolean }>(
        `SELECT * FROM (SELECT *, LEAST(
           (CASE status WHEN 'connected' THEN answered_at WHEN 'incoming' THEN created_at ELSE dialing_at END) + coalesce(time_limit_seconds, $3) * 1000,
           CASE WHEN orphaned AND status = 'incoming' THEN GREATEST(expires_at, coalesce(orphaned_at, 0)) END,
           CASE WHEN orphaned AND status IN ('dialing', 'ringing') THEN GREATEST(dialing_at + $7::bigint, coalesce(orphaned_at, 0)) END
         ) + $8::bigint AS overdue_at,
         (CASE status WHEN 'connected' THEN answered_at WHEN 'incoming' THEN created_at ELSE dialing_at END) + coalesce(time_limit_seconds, $3) * 1000 <= $4 AS past_limit
       FROM call_intents
       WHERE ((status = 'incoming' AND expires_at <= $1 AND (orphaned OR created_at + coalesce(time_limit_seconds, $3) * 1000 <= $4
               OR (${RECORDED_LEG_SQL} AND NOT $12 AND NOT (account_id = ANY($9::text[])))))
          OR (status IN ('dialing', 'ringing') AND dialing_at <= $2 AND (orphaned OR dialing_at + coalesce(time_limit_seconds, $3) * 1000 <= $4))
          OR (status = 'connected' AND answered_at + coalesce(time_limit_seconds, $3) * 1000 <= $4))
         AND (provider_read_at IS NULL OR provider_read_at <= $5)) overdue
       WHERE NOT (($12 OR account_id = ANY($9::text[])) AND overdue_at + $10::bigint > $11 AND ${RECORDED_LEG_SQL})
       ORDER BY created_at LIMIT $6`,
        [
          now - grace,
          now - grace - RING_TIMEOUT_SECONDS * 1000,
          LIMITS.platformMaxCallSeconds,
          now - grace,
          now - PROVIDER_RECHECK_SECONDS * 1000,
          places,
          RING_TIMEOUT_SECONDS * 1000,
          grace,
          held,
          PROVIDER_RECORD_PATIENCE_SECONDS * 1000,
          now,
          providerDown,
        ],
      );
    // a held account's call past its patience is ended without its record: `each` decides
    await inPasses(select, async (call) => {
      try {
        return await endOneOverdue(changes, now, call, Number(call.overdue_at), call.past_limit);
      } catch (error) {
        // the store failed this one: the others go on, and it is overdue again on a later tick
        deps.log?.(`could not end overdue call ${call.id}`, error);
      }
    }, { heldDecidedByEach: true });
  }

  /**
   * Whether a record read shows a ring its window holds is over at the provider: its leg ended, or
   * no leg of it was listed under the caller's (Twilio, before any callback named the leg: the
   * caller left before the <Dial> ran). A leg looked up by its own sid and not found tells nothing:
   * a simulated leg of another node (answered there, perhaps, its callback lost), a leg forgotten.
   */
  function ringGone(call: CallRow, settled: Settled): boolean {
    if (settled.record !== null) return FINAL_CALL_STATUSES.has(settled.record.status);
    const leg = recordedLeg(call);
    return leg !== null && 'dialedBy' in leg;
  }

  /** 'held': left for a later tick, its record not read (the provider did not answer for its account this tick). */
  async function endOneOverdue(changes: Changes, now: number, call: CallRow, overdueAt: number, pastLimit: boolean): Promise<void | 'held'> {
    // A ring its window reports as its own, past its ring window: only a record read now decides (endOverdue).
    const heldRing = call.status === 'incoming' && !call.orphaned && !pastLimit;
    if (recordedLeg(call) !== null) {
      // The provider's record decides first, and only the node that read it ends the call: one
      // ending it meanwhile would bill it to its limit, or ring out a conversation, that the
      // record settles or answers. Not read (the provider unreachable), the call waits a minute
      // for the next read, for PROVIDER_RECORD_PATIENCE_SECONDS at most.
      const patient = now < overdueAt + PROVIDER_RECORD_PATIENCE_SECONDS * 1000;
      if (!readsHeld(call.account_id)) {
        const claimed = await claimRecordRead(call.id);
        if (!claimed) return; // another node is reading it: it decides
        const settled = await readRecord(claimed, changes, 'overdue');
        if (settled === null && (patient || heldRing)) return 'held';
        if (heldRing && !ringGone(claimed, settled!)) return;
      } else if (patient || heldRing) return 'held';
    }
    // Recorded before the provider is asked to hang up: that hangup's own callback then finds the
    // call ended, and cannot record it as declined or hung up by the agent (hangupCall's order,
    // which keeps a hangup from being reported done before the provider confirms it, would let
    // it). The provider ended such a call long ago by its own limits; the hangup is a safeguard.
    const reason = call.status === 'connected' ? 'time_limit' : 'ring_timeout';
    // The provider ended an answered call at its time limit: that is when it ended, not this tick.
    const endedAt = call.status === 'connected' ? call.answered_at! + (call.time_limit_seconds ?? LIMITS.platformMaxCallSeconds) * 1000 : undefined;
    // Only as selected: a call answered meanwhile (ringing → connected), settled or answered by the
    // record just read, or (rung out for being let go of) held again by its window, is not overdue.
    const onlyIfStill = { status: call.status, orphaned: call.status !== 'connected' && !pastLimit && !heldRing };
    const ended = await db.tx((sql) => finishCall(sql, changes, now, call.id, { status: endStatusFor(call, reason), reason, endedAt, onlyIfStill }));
    if (!ended?.provider_call_sid) return;
    // Not asked once the provider failed a request of this tick: a safeguard is not worth a
    // timeout per call, holding up the tick's other rules.
    if (readsHeld(ended.account_id)) return deps.log?.(`did not ask the provider to hang up overdue call ${call.id}: it did not answer this tick`);
    try {
      const account = await loadProviderAccount(db, ended.account_id);
      await deps.providers.byName(ended.provider).hangup(account!, ended.provider_call_sid);
    } catch (error) {
      noteUnreachable(error, ended.account_id);
      deps.log?.(`could not hang up overdue call ${call.id} at the provider`, error);
    }
  }

  /** Runs a rule and announces what it changed at once, not at the end of the tick. */
  async function apply(rule: (changes: Changes, now: number) => Promise<void>, now: number): Promise<void> {
    const changes = new Changes();
    try {
      await rule(changes, now);
    } finally {
      changes.publish(bus);
    }
  }

  /** One pass of every rule at the clock's current time. */
  async function tick(): Promise<void> {
    const now = clock.now();
    unreachable = { provider: false, accounts: new Set() };
    await apply(expireQueued, now);
    if (silenceJudgeable(now)) {
      await apply(orphanStale, now);
      await apply(markOffline, now);
      await apply(endAbandoned, now);
    }
    await apply(failUnconnected, now);
    await apply(failLeftForClosedWindows, now);
    // overdue calls first: their own read decides them, and settleUnheld's read of one would put it off a minute
    await apply(endOverdue, now);
    await apply(settleUnheld, now);
    if (deps.commandRetentionMs !== undefined && now - prunedAt >= PRUNE_EVERY_MS) {
      prunedAt = now;
      await pruneCommands(db, now, deps.commandRetentionMs);
    }
    if (now >= credentialsDueAt) {
      // a pass that fails (the store) comes back as soon as a backlog's would
      credentialsDueAt = now + PRUNE_CREDENTIALS_BACKLOG_MS;
      const credentials = await pruneDeadCredentials(db, now);
      let calls = { more: false };
      const retentionMs = deps.callRetentionMs;
      if (retentionMs !== undefined) await apply(async (changes) => void (calls = await pruneCalls(db, changes, now, retentionMs)), now);
      if (!credentials.more && !calls.more) credentialsDueAt = now + PRUNE_CREDENTIALS_EVERY_MS;
    }
  }

  function schedule(periodMs: number) {
    timer = clock.after(periodMs, async () => {
      running = tick().catch((error: unknown) => deps.log?.('reaper tick failed', error));
      await running;
      if (timer) schedule(periodMs);
    });
  }

  return {
    tick,
    settledByRecords: () => settledByRecords,
    start(periodMs = 1000) {
      if (!timer) schedule(periodMs);
    },
    async stop() {
      timer?.cancel();
      timer = undefined;
      await running;
    },
  };
}

export type Reaper = ReturnType<typeof createReaper>;

/** The statuses a provider leg runs in (as SQL literals: checks.ts says why). */
const PROVIDER_LEG_STATUS_LIST = `'dialing', 'ringing', 'connected', 'incoming'`;

/** Runs `work` for every item, at most `limit` at a time; `work` handles its own failures. */
async function inParallel<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]!);
  };
  // every lane finishes before the rule does (its changes are published then, and a stop waits for it)
  await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, lane));
}
