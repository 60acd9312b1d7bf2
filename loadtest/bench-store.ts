/**
 * npm run bench:store — does the work of a call grow with the store's history? One node on a
 * scratch PostgreSQL database (DATABASE_URL), measured twice in the same run: first with only the
 * demo tenant, then after loading a long history of another agent of the same account (a million
 * ended calls by default, the windows that made them, their commands, a day of expired widget
 * sessions and launch tickets). Measured each time:
 * - a tick of the reaper (the rules every API node runs every second);
 * - a call requested by the backend (POST /calls, whose checks count the account's and the
 *   integration's live calls) and ended before it started (POST /calls/{id}/hangup).
 * Expectation (decided, no issue sets one): history ÷ empty ≤ 2× for both. A status list passed as
 * a parameter made the reaper read every call ever made: 361 ms a tick at a million calls.
 * Knobs: BENCH_CALLS (1000000), BENCH_ROUNDS (50). Results: loadtest/results/store.json and the
 * "Store" section of docs/performance.md.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ManualClock } from '../api/clock.js';
import { loadConfig } from '../api/config.js';
import { DEMO } from '../api/demo/seed.js';
import { authenticateServerKey } from '../api/domain/server-keys.js';
import { createMember } from '../api/domain/operator/accounts.js';
import { setPolicy } from '../api/domain/operator/integrations.js';
import { issueTicket } from '../api/domain/tickets.js';
import { startNode } from '../api/serve.js';
import { historyOf, loadHistory } from '../test/helpers/history.js';
import { ROOT, scratchDatabase, writeResult } from './lib/run.js';
import { writeDocsSection } from './push/report.js';

const CALLS = Number(process.env.BENCH_CALLS ?? 1_000_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 50);
const LIMIT = 2;
const HEADING = '## Store under a long history (npm run bench:store)';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const round3 = (value: number) => Math.round(value * 1000) / 1000;

interface Phase {
  reaper_tick_ms: number;
  call_request_and_hangup_ms: number;
}

async function main() {
  if (!process.env.DATABASE_URL) throw new Error('bench:store measures PostgreSQL: set DATABASE_URL');
  const database = await scratchDatabase(process.env.DATABASE_URL);
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bench-store-'));
  const clock = new ManualClock(Date.now());
  const config = loadConfig({ PORT: '0', GATEWAY_PORT: '0', DEMO_PORT: '0', C2C_DATA_DIR: dataDir, LOG_LEVEL: 'warn', DATABASE_URL: database.url });
  const node = await startNode(config, { role: 'all', demo: true, logger: false, clock });
  const admin = new pg.Client({ connectionString: database.url }); // no statement timeout: loading takes a while
  await admin.connect();
  try {
    const { services, app } = node;
    // the bench runs the reaper's ticks itself, one at a time
    await services.reaper.stop();
    const deps = { db: services.db, bus: services.bus, clock: services.clock };
    await setPolicy(deps, DEMO.integrationId, { concurrencyLimit: 1_000_000 });
    const serverKey = (JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8')) as { server_key: string }).server_key;
    const { integration, keyId } = await authenticateServerKey(services.db, serverKey);
    const origin = (JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8')) as { allowed_origin: string }).allowed_origin;

    // The agent whose calls are measured: a ready window, heartbeating as the clock moves.
    const session = await services.sessions.create(integration, keyId, { integration_id: DEMO.integrationId, agent: { type: 'email', value: DEMO.agent.email }, origin });
    const ticket = await issueTicket(services.db, clock, config.siteUrl, await services.sessions.authenticate(session.token, origin));
    const pairing = await services.engines.pair({ ticket: ticket.ticket, simulated: true, client: 'window' });
    const heartbeat = async () =>
      void (await services.engines.heartbeat(await services.engines.authenticate(pairing.token), { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null, acks: [] }, 'rest'));
    const api = (method: 'POST', url: string, body?: unknown) =>
      app!.inject({ method, url: `/api/v1/click2call${url}`, headers: { authorization: `Bearer ${serverKey}`, ...(body ? { 'content-type': 'application/json' } : {}) }, payload: body ? JSON.stringify(body) : undefined });

    const measure = async (rounds = ROUNDS): Promise<Phase> => {
      const ticks: number[] = [];
      const calls: number[] = [];
      for (let i = 0; i < rounds; i += 1) {
        await clock.advance(1000);
        await heartbeat();
        const tickStart = performance.now();
        await services.reaper.tick();
        ticks.push(performance.now() - tickStart);
        const callStart = performance.now();
        const requested = await api('POST', '/calls', { integration_id: DEMO.integrationId, agent: { type: 'email', value: DEMO.agent.email }, phone_number: '+12025550123' });
        if (requested.statusCode !== 202) throw new Error(`POST /calls answered ${requested.statusCode}: ${requested.body}`);
        const ended = await api('POST', `/calls/${(requested.json() as { request_id: string }).request_id}/hangup`);
        if (ended.statusCode !== 200) throw new Error(`hangup answered ${ended.statusCode}: ${ended.body}`);
        calls.push(performance.now() - callStart);
      }
      return { reaper_tick_ms: round3(median(ticks)), call_request_and_hangup_ms: round3(median(calls)) };
    };

    await measure(Math.ceil(ROUNDS / 5)); // warm-up: code compiled, statements prepared
    console.log(`  empty store: ${ROUNDS} rounds …`);
    const empty = await measure();
    console.log(`      reaper tick ${empty.reaper_tick_ms} ms, call requested and ended ${empty.call_request_and_hangup_ms} ms`);

    console.log(`  loading a history of ${CALLS} calls …`);
    const loadStart = performance.now();
    const member = await createMember(deps, { accountId: DEMO.accountId, email: 'history@demo.example', name: 'History', departmentId: DEMO.sales });
    const size = historyOf(CALLS);
    await loadHistory(admin, { integrationId: DEMO.integrationId, accountId: DEMO.accountId, memberId: member.id, origin }, clock.now(), size);
    const loadSeconds = round3((performance.now() - loadStart) / 1000);
    console.log(`      loaded in ${loadSeconds} s; ${ROUNDS} rounds …`);
    const history = await measure();
    console.log(`      reaper tick ${history.reaper_tick_ms} ms, call requested and ended ${history.call_request_and_hangup_ms} ms`);

    const ratios = {
      reaper_tick: round3(history.reaper_tick_ms / empty.reaper_tick_ms),
      call_request_and_hangup: round3(history.call_request_and_hangup_ms / empty.call_request_and_hangup_ms),
    };
    const met = ratios.reaper_tick <= LIMIT && ratios.call_request_and_hangup <= LIMIT;
    const when = new Date().toISOString().slice(0, 16).replace('T', ' ');
    const result = {
      when,
      history: size,
      rounds: ROUNDS,
      empty,
      with_history: history,
      ratios,
      limit: LIMIT,
      met,
    };
    const file = writeResult('store', result);
    console.log(`\n  history ÷ empty: reaper tick ${ratios.reaper_tick}×, call ${ratios.call_request_and_hangup}× (expected ≤ ${LIMIT}×: ${met ? 'met' : 'MISSED'})\n  written ${file}`);
    writeDocsSection(
      join(ROOT, 'docs', 'performance.md'),
      [
        '```sh',
        'DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench:store',
        '```',
        '',
        'Does the work of a call grow with what the store has kept? One node on a scratch PostgreSQL database, measured twice in one run: with only the demo tenant, then after loading the history of another agent of the same account (the ended calls, the windows that made them, their commands, a day of expired widget sessions and launch tickets). Each figure is the median of `BENCH_ROUNDS` rounds. The expectation (decided: no issue sets one) is that history costs at most 2×. Every statement runs on a generic plan (`api/store/pg.ts`), so this is what a status list passed as a parameter broke: the reaper then read every call ever made, and a call request every call of its account. This bench, run on the commit before that was fixed (`1ebc39d`, the bench file copied in; 2026-11-24, a million calls), measured a reaper tick of 361 ms (204× that of the empty store) and 447 ms for a call requested and ended (57×). `test/store/query-plans.test.ts` guards the same in the tests, by plan rather than by time.',
        '',
        `Results: \`loadtest/results/store.json\` (${when} UTC).`,
        '',
        '| | empty store | with history | history ÷ empty | expected |',
        '|---|---|---|---|---|',
        `| history | – | ${size.calls} calls, ${size.engines} windows, ${size.commands} commands, ${size.debits} debits, ${size.widgetSessions} widget sessions, ${size.launchTickets} launch tickets | | |`,
        `| a reaper tick (every API node, every second) | ${empty.reaper_tick_ms} ms | ${history.reaper_tick_ms} ms | ${ratios.reaper_tick}× | ≤ ${LIMIT}×: ${ratios.reaper_tick <= LIMIT ? 'met' : '**MISSED**'} |`,
        `| POST /calls, then POST /calls/{id}/hangup | ${empty.call_request_and_hangup_ms} ms | ${history.call_request_and_hangup_ms} ms | ${ratios.call_request_and_hangup}× | ≤ ${LIMIT}×: ${ratios.call_request_and_hangup <= LIMIT ? 'met' : '**MISSED**'} |`,
      ].join('\n'),
      HEADING,
    );
    console.log('  updated docs/performance.md');
  } finally {
    await admin.end();
    await node.close();
    await database.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
