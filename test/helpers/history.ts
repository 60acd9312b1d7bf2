/**
 * A long history of one agent, written straight into a PostgreSQL store: ended calls, the closed
 * windows that made them, their commands and debits, and a day of expired widget sessions with
 * some launch tickets (expired, but not a day past it: the retention pass keeps them), and a long
 * do-not-call list, half the account's, half platform-wide. Used where
 * the store's size must not change what a call costs (test/store/query-plans.test.ts,
 * loadtest/bench-store.ts). The client should have no statement timeout: a million rows take a while.
 */
import type pg from 'pg';

export interface HistoryOwner {
  integrationId: string;
  accountId: string;
  /** a member of the account whose rows are not the workload's */
  memberId: string;
  origin: string;
}

export interface HistorySize {
  calls: number;
  engines: number;
  commands: number;
  widgetSessions: number;
  launchTickets: number;
  debits: number;
  blockedNumbers: number;
}

/** The proportions of a call centre's history to its calls. */
export function historyOf(calls: number): HistorySize {
  const widgetSessions = Math.floor(calls / 3);
  return {
    calls,
    engines: Math.max(1, Math.floor(calls / 10)),
    commands: Math.floor(calls / 5),
    widgetSessions,
    launchTickets: Math.ceil(widgetSessions / 5),
    debits: Math.ceil(calls / 2),
    blockedNumbers: Math.ceil(calls / 2),
  };
}

export async function loadHistory(admin: pg.Client, owner: HistoryOwner, now: number, size: HistorySize): Promise<void> {
  const { integrationId, accountId, memberId, origin } = owner;
  await admin.query(
    `INSERT INTO engines (id, integration_id, member_id, lookup, secret_hash, state, created_at, last_seen_at, closed_at)
     SELECT 'eng_h' || g, $1, $2, 'h' || g, '\\x00', 'closed', $3::bigint - g::bigint * 60000, $3::bigint - g::bigint * 60000, $3::bigint - g::bigint * 60000
     FROM generate_series(1, $4::int) g`,
    [integrationId, memberId, now, size.engines],
  );
  await admin.query(
    `INSERT INTO call_intents (id, integration_id, account_id, member_id, direction, status, phone_number, policy, engine_id,
       created_at, expires_at, claimed_at, ended_at, provider_call_sid, idempotency_key)
     SELECT 'ci_h' || g, $1, $2, $3, 'outbound', 'completed', '+12025550123', '{}', 'eng_h' || (1 + g % $5::int),
       $4::bigint - g::bigint * 1000, $4::bigint - g::bigint * 1000 + 60000, $4::bigint - g::bigint * 1000, $4::bigint - g::bigint * 1000 + 5000, 'CAh' || g, 'h' || g
     FROM generate_series(1, $6::int) g`,
    [integrationId, accountId, memberId, now, size.engines, size.calls],
  );
  await admin.query(
    `INSERT INTO widget_commands (integration_id, member_id, request_id, kind, engine_id, status, created_at)
     SELECT $1, $2, 'h' || g, 'focus', 'eng_h' || (1 + g % $4::int), 'done', $3::bigint - g::bigint * 1000 FROM generate_series(1, $5::int) g`,
    [integrationId, memberId, now, size.engines, size.commands],
  );
  await admin.query(
    `INSERT INTO wallet_ledger (account_id, call_id, amount_micros, reason, created_at)
     SELECT $1, 'ci_h' || (g * 2 - 1), -1000, 'call', $2::bigint - g::bigint * 2000 FROM generate_series(1, $3::int) g`,
    [accountId, now, size.debits],
  );
  await admin.query(
    `INSERT INTO widget_sessions (id, integration_id, member_id, origin, lookup, secret_hash, created_at, expires_at)
     SELECT 'ws_h' || g, $1, $2, $3, 'h' || g, '\\x00', $4::bigint - 3600000 - (g::bigint * 72000000 / $5::int), $4::bigint - 1800000 - (g::bigint * 72000000 / $5::int)
     FROM generate_series(1, $5::int) g`,
    [integrationId, memberId, origin, now, size.widgetSessions],
  );
  await admin.query(
    `INSERT INTO launch_tickets (id, widget_session_id, integration_id, member_id, lookup, secret_hash, created_at, expires_at)
     SELECT 'lt_h' || g, 'ws_h' || g, $1, $2, 'h' || g, '\\x00', $3::bigint - 7200000, $3::bigint - 6600000 FROM generate_series(1, $4::int, 5) g`,
    [integrationId, memberId, now, size.widgetSessions],
  );
  await admin.query(
    `INSERT INTO blocked_numbers (account_id, number, created_at)
     SELECT CASE WHEN g % 2 = 0 THEN $1 END, '+1999' || lpad(g::text, 7, '0'), $2 FROM generate_series(1, $3::int) g`,
    [accountId, now, size.blockedNumbers],
  );
  await admin.query('ANALYZE');
}
