/**
 * The engine (call window) lifecycle over HTTP (spec sections 1, 3, 4, 5 and 8): launch tickets
 * (fragment, single use, 10 minutes, dead with their widget session), one engine per agent (a new
 * window replaces an idle one and is refused while the old one is on a call), voice tokens, the
 * 90 s offline rule and its deliberate end of provider legs, orphaned calls (silent, closed or
 * forgetful windows) and their hangup, the engine token's idle lifetime, revocation and disabling
 * taking effect on the next engine request, and the atomic claim (claimed once, however many of
 * its window's claims race; a repeated claim answers the same claim until the voice leg starts).
 *
 * One harness per store driver (opening a store is the slow part); each test seeds its own tenant,
 * so revocations and disabled members never leak into the next one, and starts with no live
 * provider legs. The reaper does not run by itself here: tests move the clock and then call
 * reaper.tick().
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import { C2CError } from '../../shared/errors.js';
import { LIMITS } from '../../shared/limits.js';
import { createMember, updateMember } from '../../api/domain/operator/accounts.js';
import { revokeIntegration } from '../../api/domain/operator/revocation.js';
import { injectInbound } from '../../api/domain/calls/inbound.js';
import { CLOSED_WINDOW_MESSAGE } from '../../api/domain/engines/auth.js';
import { pairEngine } from '../../api/domain/engines/pair.js';
import type { Db } from '../../api/store/index.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { client, createHarness, type Client, type Harness, type Reply } from '../helpers/harness.js';
import { command, heartbeat, launchTicket, openSession, READY, readyAgent, requestCall, widgetState, type Agent } from '../helpers/flows.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('engine lifecycle on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const deps = () => ({ db: h.services.db, bus: h.services.bus, clock: h.services.clock });
  const nowSeconds = () => Math.floor(h.clock.now() / 1000);
  const callStatus = async (id: string) => {
    const res = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  const state = async (widgetToken: string) => {
    const res = await widgetState(api, widgetToken);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  const pair = (ticket: string, simulated = true) => api.post('/engine/pair', { ticket, simulated });
  const tick = () => h.services.reaper.tick();

  /** POST /calls → dial request on the heartbeat → claim → ringing → connected (3 s after the claim). */
  async function connectedCall(agent: Agent): Promise<{ id: string; claimedAt: number; answeredAt: number }> {
    const requested = await requestCall(api, t);
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id: string = requested.body.request_id;
    const beat = await heartbeat(api, agent.engineToken);
    expect(beat.body.dial_requests.map((d: { request_id: string }) => d.request_id)).toEqual([id]);
    const claimed = await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
    expect(claimed.body.call.status).toBe('dialing');
    const claimedAt = nowSeconds();
    expect((await heartbeat(api, agent.engineToken, { call_id: id, busy: true })).status).toBe(200);
    await h.clock.advanceSeconds(3);
    const connected = await callStatus(id);
    expect(connected).toMatchObject({ status: 'connected', orphaned: false });
    expect(connected.answered_at).toBe(nowSeconds());
    return { id, claimedAt, answeredAt: connected.answered_at };
  }

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
  });
  afterAll(() => h.close());

  // Every test gets its own tenant (account, integration, agent) on the suite's store and clock.
  beforeEach(async () => {
    t = await seedTenant(h.services);
  });

  // Whatever a test left on the line is hung up through the provider, so the next one starts with
  // no live provider legs; a fault switch is always restored.
  afterEach(async () => {
    h.services.providers.simulator.faults.tokens = true;
    const live = await h.services.db.query<{ id: string; integration_id: string }>(
      `SELECT id, integration_id FROM call_intents WHERE provider_call_sid IS NOT NULL AND ended_at IS NULL`,
    );
    for (const call of live) await h.services.calls.hangupByServer(call.integration_id, call.id);
  });

  it('launch tickets travel in the fragment, are single use, live 10 minutes and die with their session', async () => {
    const widgetToken = await openSession(api, t);
    const first = await api.post('/widget/launch-ticket', undefined, { auth: widgetToken, origin: ORIGIN });
    const second = await api.post('/widget/launch-ticket', undefined, { auth: widgetToken, origin: ORIGIN });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    const ticket: string = first.body.ticket;
    expect(first.body.window_url).toBe(`${h.config.siteUrl}/click2call/window#ticket=${encodeURIComponent(ticket)}`);
    const url = new URL(first.body.window_url);
    expect(url.search).toBe('');
    expect(url.hash).toBe(`#ticket=${encodeURIComponent(ticket)}`);
    expect(first.body.expires_in).toBe(600);
    expect(second.body.ticket).not.toBe(ticket);
    // The same window name for every ticket of one agent, so window.open() finds the live window.
    expect(typeof first.body.window_name).toBe('string');
    expect(first.body.window_name.length).toBeGreaterThan(0);
    expect(second.body.window_name).toBe(first.body.window_name);

    // Single use: the first pairing consumes it, a replay is refused.
    expect((await pair(ticket)).status).toBe(201);
    await expectError(pair(ticket), 401, 'ticket_invalid');

    // 10 minutes: still good at 599 s, dead at 600 s.
    const early = await launchTicket(api, widgetToken);
    const late = await launchTicket(api, widgetToken);
    await h.clock.advanceSeconds(599);
    expect((await pair(early)).status).toBe(201);
    await h.clock.advanceSeconds(1);
    await expectError(pair(late), 401, 'ticket_invalid');

    // Garbage, and a well-formed ticket with a wrong secret.
    await expectError(pair('garbage'), 401, 'ticket_invalid');
    const fresh = await launchTicket(api, widgetToken);
    const forged = fresh.slice(0, -1) + (fresh.endsWith('A') ? 'B' : 'A');
    await expectError(pair(forged), 401, 'ticket_invalid');
    expect((await pair(fresh)).status).toBe(201);

    // A ticket whose widget session was revoked (logout) cannot pair any more.
    const other = await openSession(api, t);
    const orphanTicket = await launchTicket(api, other);
    const revoked = await api.post('/widget/revoke', undefined, { auth: other, origin: ORIGIN });
    expect(revoked.status).toBe(200);
    await expectError(pair(orphanTicket), 401, 'ticket_invalid');
  });

  it('answers a pairing asked again with its ticket and attempt (the first answer was lost) with the same engine under a new token; any other reuse of the ticket is refused', async () => {
    const widgetToken = await openSession(api, t);
    const ticket = await launchTicket(api, widgetToken);
    const attempt = 'a'.repeat(16) + '-first-try';
    const first = await api.post('/engine/pair', { ticket, simulated: true, attempt });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    // the answer reached someone else, who used it: its check is cached on this node
    expect((await heartbeat(api, first.body.engine_token)).status).toBe(200);
    // the answer was lost to the window: it asks again
    const again = await api.post('/engine/pair', { ticket, simulated: true, attempt });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    expect(again.body.engine.id).toBe(first.body.engine.id);
    expect(again.body.engine_token).not.toBe(first.body.engine_token);
    expect((await heartbeat(api, again.body.engine_token)).status).toBe(200);
    // the lost answer's token is replaced: refused at once, its cached check dropped
    await expectError(heartbeat(api, first.body.engine_token), 401, 'unauthorized');
    // a pairing without the attempt, or with another, is a reuse of a spent ticket
    await expectError(api.post('/engine/pair', { ticket, simulated: true }), 401, 'ticket_invalid');
    await expectError(api.post('/engine/pair', { ticket, simulated: true, attempt: 'b'.repeat(20) }), 401, 'ticket_invalid');
    // nor once the ticket would have expired
    await h.clock.advanceSeconds(601);
    await expectError(api.post('/engine/pair', { ticket, simulated: true, attempt }), 401, 'ticket_invalid');
  });

  it('pairs one window of two that present one ticket at the same moment; the other is refused ticket_invalid', async () => {
    const widgetToken = await openSession(api, t);
    const ticket = await launchTicket(api, widgetToken);
    const both = await Promise.all([pair(ticket), pair(ticket)]);
    expect(both.map((r) => r.status).sort()).toEqual([201, 401]);
    expect(both.find((r) => r.status === 401)!.body).toMatchObject({ ok: false, error: 'ticket_invalid' });
    const paired = both.find((r) => r.status === 201)!;
    expect((await heartbeat(api, paired.body.engine_token)).status).toBe(200);
    const [open] = await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM engines WHERE integration_id = $1 AND member_id = $2 AND state <> 'closed'`, [t.integrationId, t.agent.id]);
    expect(open!.n).toBe(1);
  });

  it('does not answer a pairing asked again once its engine was replaced or closed', async () => {
    const widgetToken = await openSession(api, t);
    const ticket = await launchTicket(api, widgetToken);
    const attempt = 'c'.repeat(24);
    const first = await api.post('/engine/pair', { ticket, simulated: true, attempt });
    expect(first.status).toBe(201);
    expect((await api.post('/engine/close', {}, { auth: first.body.engine_token })).status).toBe(200);
    await expectError(api.post('/engine/pair', { ticket, simulated: true, attempt }), 401, 'ticket_invalid');
  });

  it('a second window replaces an idle first one', async () => {
    const first = await readyAgent(api, t);
    expect((await state(first.widgetToken)).engine).toMatchObject({ id: first.engineId, state: 'ready', live: true });

    const paired = await pair(await launchTicket(api, first.widgetToken));
    expect(paired.status, JSON.stringify(paired.body)).toBe(201);
    // whose calls, and for which integration by its operator-given name (the window's consent question)
    expect(paired.body).toMatchObject({ integration_id: t.integrationId, integration_name: 'Acme CRM', agent: { name: 'Ana Agent', identifier: 'ana@acme.example' } });
    const secondId: string = paired.body.engine.id;
    expect(secondId).not.toBe(first.engineId);

    await expectError(heartbeat(api, first.engineToken), 401, 'unauthorized');
    await expectError(api.post('/engine/voice-token', undefined, { auth: first.engineToken }), 401, 'unauthorized');
    expect((await heartbeat(api, paired.body.engine_token)).status).toBe(200);
    expect((await state(first.widgetToken)).engine).toMatchObject({ id: secondId, state: 'ready', live: true });
  });

  it('a reloaded or reopened window keeps its availability; one opened afresh, or after the last went offline, starts Available', async () => {
    const first = await readyAgent(api, t);
    const onBreak = () => command(api, first.widgetToken, { kind: 'availability', request_id: `break-${h.clock.now()}`, available: false });
    expect((await onBreak()).body.status).toBe('done');
    // opened again while the first is live: it takes over
    const reopened = await pair(await launchTicket(api, first.widgetToken));
    expect(reopened.status, JSON.stringify(reopened.body)).toBe(201);
    expect(reopened.body.engine).toMatchObject({ available: false });
    expect((await state(first.widgetToken)).engine).toMatchObject({ id: reopened.body.engine.id, available: false });
    // a reload: the page's unload closes the engine, and the reloaded page pairs again at once
    await h.clock.advanceSeconds(5);
    await api.post('/engine/close', { reason: 'unload' }, { auth: reopened.body.engine_token });
    await h.clock.advanceSeconds(2);
    const reloaded = await pair(await launchTicket(api, first.widgetToken));
    expect(reloaded.body.engine).toMatchObject({ available: false });
    // closed by the agent (going home): the next window starts Available
    await h.clock.advanceSeconds(5);
    await api.post('/engine/close', { reason: 'closed' }, { auth: reloaded.body.engine_token });
    await h.clock.advanceSeconds(5);
    const fresh = await pair(await launchTicket(api, first.widgetToken));
    expect(fresh.body.engine).toMatchObject({ available: true });
    // unload long ago is no reload either
    expect((await heartbeat(api, fresh.body.engine_token)).status).toBe(200);
    expect((await onBreak()).body.status).toBe('done');
    await h.clock.advanceSeconds(5);
    await api.post('/engine/close', { reason: 'unload' }, { auth: fresh.body.engine_token });
    await h.clock.advanceSeconds(10 * 60);
    expect((await pair(await launchTicket(api, first.widgetToken))).body.engine).toMatchObject({ available: true });
  });

  it('a window paired after the last one went offline (the laptop slept) starts Available', async () => {
    const agent = await readyAgent(api, t);
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'sleepy', available: false })).body.status).toBe('done');
    await h.clock.advanceSeconds(91);
    await h.services.reaper.tick();
    expect((await state(agent.widgetToken)).engine).toMatchObject({ state: 'offline', available: false });
    const next = await pair(await launchTicket(api, agent.widgetToken));
    expect(next.body.engine).toMatchObject({ available: true });
  });

  it('a second window is refused while the first is on a call, and its ticket pairs once the call ends', async () => {
    const agent = await readyAgent(api, t);
    const { id } = await connectedCall(agent);

    const ticket = await launchTicket(api, agent.widgetToken);
    await expectError(pair(ticket), 409, 'agent_busy');
    // The first window keeps its call and its credential.
    expect((await heartbeat(api, agent.engineToken, { call_id: id, busy: true })).status).toBe(200);
    expect((await state(agent.widgetToken)).engine).toMatchObject({ id: agent.engineId, live: true });
    expect((await callStatus(id)).status).toBe('connected');

    const hangup = await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'busy-hangup' });
    expect(hangup.status, JSON.stringify(hangup.body)).toBe(200);
    expect((await callStatus(id)).status).toBe('completed');

    const paired = await pair(ticket);
    expect(paired.status, JSON.stringify(paired.body)).toBe(201);
    expect(paired.body.engine.id).not.toBe(agent.engineId);
    await expectError(heartbeat(api, agent.engineToken), 401, 'unauthorized');
    expect((await state(agent.widgetToken)).engine.id).toBe(paired.body.engine.id);
  });

  it('a window closed in the store cannot claim a call nor heartbeat, whatever its token\'s cached check says: 401, and the call stays queued', async () => {
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t);
    const id: string = requested.body.request_id;
    expect((await heartbeat(api, agent.engineToken)).body.dial_requests).toHaveLength(1);
    // closed by a pairing whose bus message has not reached this node's cache yet
    await h.services.db.query(`UPDATE engines SET state = 'closed', closed_at = $2, close_reason = 'replaced' WHERE id = $1`, [agent.engineId, h.clock.now()]);
    await expectError(api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken }), 401, 'unauthorized');
    expect((await callStatus(id)).status).toBe('queued');
    // nor does its heartbeat go on answered (the window would go on saying it is ready)
    const refused = await heartbeat(api, agent.engineToken);
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ ok: false, error: 'unauthorized', message: CLOSED_WINDOW_MESSAGE });
  });

  // PGlite runs one transaction at a time: only PostgreSQL can interleave these.
  if (driver === 'pg') {
    it('a new window pairing while the old one claims a call waits for the claim, and is then refused agent_busy: the call is never left to a closed window', async () => {
      const agent = await readyAgent(api, t);
      const requested = await requestCall(api, t);
      const id: string = requested.body.request_id;
      expect((await heartbeat(api, agent.engineToken)).body.dial_requests).toHaveLength(1);
      const ticket = await launchTicket(api, agent.widgetToken);
      const lockWaits = async () =>
        (await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))[0]!.n;
      // the claim is held up on its call's row, after it has read its window
      let release: () => void = () => {};
      const holding = h.services.db.tx(async (sql) => {
        await sql.query('SELECT 1 FROM call_intents WHERE id = $1 FOR UPDATE', [id]);
        await new Promise<void>((resolve) => (release = resolve));
      });
      const claiming = api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
      await vi.waitFor(async () => expect(await lockWaits()).toBe(1), { timeout: 10_000 });
      const pairing = pair(ticket);
      let paired: Reply | undefined;
      void pairing.then((reply) => (paired = reply));
      // the pairing waits for the claim (before the fix it closed the old window at once)
      await vi.waitFor(async () => expect((await lockWaits()) === 2 || paired !== undefined).toBe(true), { timeout: 10_000 });
      expect(paired).toBeUndefined();
      release();
      await holding;
      expect((await claiming).status).toBe(200);
      await expectError(pairing, 409, 'agent_busy');
      expect((await heartbeat(api, agent.engineToken, { call_id: id })).status).toBe(200);
    });

    /**
     * A Db whose transactions stop right after the first statement matching `at` (until `release`),
     * to run a pairing at that point of an incoming call's routing.
     */
    function pausedAfter(at: (text: string) => boolean) {
      const db = h.services.db;
      let reached = false;
      let release: () => void = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      const paused = {
        ...db,
        tx: ((fn: Parameters<typeof db.tx>[0], options?: Parameters<typeof db.tx>[1]) =>
          db.tx(
            (sql) =>
              fn({
                query: async (text: string, params?: readonly unknown[]) => {
                  const rows = await sql.query(text, params);
                  if (!reached && at(text)) {
                    reached = true;
                    await released;
                  }
                  return rows;
                },
              } as typeof sql),
            options,
          )) as typeof db.tx,
      } as typeof db;
      onTestFinished(release); // a test failing before it lets go does not leave the transaction open
      return { db: paused, reached: () => reached, release };
    }

    it('an incoming call routed to a window a new pairing closes meanwhile is not recorded on it: it rings the next routable agent, else none (agent_offline, the leg let go)', async () => {
      const agent = await readyAgent(api, t);
      const ticket = await launchTicket(api, agent.widgetToken);
      // the routing has chosen the window (inside its transaction), not yet recorded the call
      let paused = pausedAfter((text) => text.includes('FROM engines e JOIN members'));
      const route = (db: Db, from: string) => injectInbound({ ...h.services, db }, { integrationId: t.integrationId, from }).then((routed) => ({ routed }), (error: unknown) => ({ error }));
      let outcome = route(paused.db, '+12025550191');
      await vi.waitFor(() => expect(paused.reached()).toBe(true), { timeout: 10_000 });
      expect((await pair(ticket)).status).toBe(201); // the old window closed: it held no call
      paused.release();
      // the new window is not ready yet: nobody to ring (before the fix: recorded on the closed window)
      expect(await outcome).toMatchObject({ error: { code: 'agent_offline' } });
      expect(h.services.providers.simulator.liveLegs()).toBe(0);
      const onWindow = async (engineId: string) => (await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM call_intents WHERE engine_id = $1`, [engineId]))[0]!.n;
      expect(await onWindow(agent.engineId)).toBe(0);

      // Again, with another agent ready, idle less long: the call rings that agent.
      const again = await readyAgent(api, t);
      await h.clock.advanceSeconds(1);
      await createMember(deps(), { accountId: t.accountId, email: 'zed@acme.example', name: 'Zed', departmentId: t.salesId });
      const zed = await readyAgent(api, t, 'zed@acme.example');
      paused = pausedAfter((text) => text.includes('FROM engines e JOIN members'));
      outcome = route(paused.db, '+12025550193');
      await vi.waitFor(() => expect(paused.reached()).toBe(true), { timeout: 10_000 });
      expect((await pair(await launchTicket(api, again.widgetToken))).status).toBe(201);
      paused.release();
      expect(await outcome).toMatchObject({ routed: { call: { status: 'incoming', engine_id: zed.engineId } } });
      expect(await onWindow(again.engineId)).toBe(0);
    });

    it("an agent's Available choice made while a new window pairs lands on the new window, not on the one the pairing closed", async () => {
      const agent = await readyAgent(api, t);
      expect((await state(agent.widgetToken)).engine).toMatchObject({ available: true });
      const ticket = await launchTicket(api, agent.widgetToken);
      // the pairing holds the agent's lock and the old window's row, the old window's choice (Available) read, not yet committed
      const paused = pausedAfter((text) => text.includes('FOR NO KEY UPDATE'));
      const pairing = pairEngine(paused.db, h.services.clock, { ticket, simulated: true, client: 'window' });
      await vi.waitFor(() => expect(paused.reached()).toBe(true), { timeout: 10_000 });
      // decided on the old window, which its widgets still show open
      const away = command(api, agent.widgetToken, { kind: 'availability', request_id: 'away-while-pairing', available: false });
      const lockWaits = async () =>
        (await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))[0]!.n;
      await vi.waitFor(async () => expect(await lockWaits()).toBe(1), { timeout: 10_000 });
      paused.release();
      const { engine } = await pairing;
      expect((await away).body).toMatchObject({ ok: true, status: 'done' });
      // before: written on the closed window after the pairing had copied Available to the new one
      const [row] = await h.services.db.query<{ available: boolean }>('SELECT available FROM engines WHERE id = $1', [engine.id]);
      expect(row).toEqual({ available: false });
    });

    it('a new window pairing while an incoming call is recorded on the old one waits for it, and is then refused agent_busy', async () => {
      const agent = await readyAgent(api, t);
      const ticket = await launchTicket(api, agent.widgetToken);
      // the routing holds its window's row, the call not yet inserted
      const paused = pausedAfter((text) => text.includes('FROM engines WHERE id = $1') && text.includes('FOR SHARE'));
      const routing = injectInbound({ ...h.services, db: paused.db }, { integrationId: t.integrationId, from: '+12025550192' });
      await vi.waitFor(() => expect(paused.reached()).toBe(true), { timeout: 10_000 });
      const lockWaits = async () =>
        (await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))[0]!.n;
      const pairing = pair(ticket);
      let paired: Reply | undefined;
      void pairing.then((reply) => (paired = reply));
      await vi.waitFor(async () => expect((await lockWaits()) === 1 || paired !== undefined).toBe(true), { timeout: 10_000 });
      expect(paired).toBeUndefined();
      paused.release();
      const { call } = await routing;
      expect(call).toMatchObject({ status: 'incoming', engine_id: agent.engineId });
      await expectError(pairing, 409, 'agent_busy');
      expect((await heartbeat(api, agent.engineToken)).body.call).toMatchObject({ request_id: call.id, status: 'incoming' });
    });
  }

  it('a report that committed keeps its first acks when a later report of the same window in its batch fails: the widget hears of the failed command', async () => {
    const agent = await readyAgent(api, t);
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'batch-focus' });
    expect(focus.status, JSON.stringify(focus.body)).toBe(200);
    const commandId: number = focus.body.command_id;
    const context = await h.services.engines.authenticate(agent.engineToken);
    const report = { state: 'ready' as const, mic_ready: true, busy: false, muted: false, call_id: null, acks: [{ command_id: commandId, result: 'failed' as const, error: 'No voice device.' }] };
    // The same report twice (a socket heartbeat timed out and went again over REST) lands in one
    // batch, in two rounds; the second round's statement times out on a lock.
    const db = h.services.db;
    const query = db.query;
    let reports = 0;
    db.query = (async (text: string, params?: readonly unknown[]) => {
      if (text.startsWith('WITH input AS') && ++reports === 2) throw new C2CError('service_unavailable', 'canceling statement due to statement timeout');
      return query.call(db, text, params);
    }) as typeof db.query;
    let outcomes: PromiseSettledResult<unknown>[];
    try {
      outcomes = await Promise.allSettled([h.services.engines.heartbeat(context, report, 'rest'), h.services.engines.heartbeat(context, report, 'rest')]);
    } finally {
      db.query = query;
    }
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected']);
    const [row] = await db.query<{ acks: number }>('SELECT acks FROM widget_commands WHERE id = $1', [commandId]);
    expect(row!.acks).toBe(1);
    expect((await state(agent.widgetToken)).failed_command).toMatchObject({ request_id: 'batch-focus', kind: 'focus', message: 'No voice device.' });
  });

  it('answers a heartbeat whose report committed even when flagging a call it left out fails: its first acks are acted on, and the next heartbeat flags the call', async () => {
    const agent = await readyAgent(api, t);
    const { id } = await connectedCall(agent);
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'reconcile-focus' });
    const commandId: number = focus.body.command_id;
    await h.clock.advanceSeconds(10);
    const db = h.services.db;
    const tx = db.tx;
    let failed = 0;
    db.tx = (async (...args: Parameters<typeof tx>) => {
      if (failed++ === 0) throw new C2CError('service_unavailable', 'canceling statement due to statement timeout');
      return tx.apply(db, args);
    }) as typeof db.tx;
    let beat: Reply;
    try {
      // the window no longer reports the call, and could not carry out the focus
      beat = await heartbeat(api, agent.engineToken, { call_id: null, acks: [{ command_id: commandId, result: 'failed', error: 'No voice device.' }] });
    } finally {
      db.tx = tx;
    }
    expect(failed).toBeGreaterThan(0);
    expect(beat.status, JSON.stringify(beat.body)).toBe(200);
    expect(beat.body.call).toMatchObject({ request_id: id, orphaned: false });
    expect((await state(agent.widgetToken)).failed_command).toMatchObject({ request_id: 'reconcile-focus', message: 'No voice device.' });
    expect((await heartbeat(api, agent.engineToken, { call_id: null })).body.call).toMatchObject({ request_id: id, orphaned: true });
  });

  it('voice-token answers a provider token for c2c_<engine_id>, and 503 when the provider is down', async () => {
    const widgetToken = await openSession(api, t);
    const paired = await pair(await launchTicket(api, widgetToken));
    expect(paired.status).toBe(201);
    const engineToken: string = paired.body.engine_token;
    const engineId: string = paired.body.engine.id;

    const res = await api.post('/engine/voice-token', undefined, { auth: engineToken });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.identity).toBe(`c2c_${engineId}`);
    expect(res.body.token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
    const claims = JSON.parse(Buffer.from(res.body.token.split('.')[1], 'base64url').toString('utf8'));
    expect(claims.grants.identity).toBe(`c2c_${engineId}`);
    expect(res.body.expires_at).toBeGreaterThan(nowSeconds());

    const simulator = h.services.providers.simulator;
    simulator.faults.tokens = false;
    try {
      await expectError(api.post('/engine/voice-token', undefined, { auth: engineToken }), 503, 'provider_unavailable');
    } finally {
      simulator.faults.tokens = true;
    }
    expect((await api.post('/engine/voice-token', undefined, { auth: engineToken })).status).toBe(200);
  });

  it('an engine is offline after 90 s without a heartbeat, revives with one, and one missed heartbeat is no hangup', async () => {
    const agent = await readyAgent(api, t);
    await h.clock.advanceSeconds(89);
    await tick();
    expect((await state(agent.widgetToken)).engine).toMatchObject({ state: 'ready', live: true });

    await h.clock.advanceSeconds(1);
    await tick();
    expect((await state(agent.widgetToken)).engine).toMatchObject({ state: 'offline', live: false });
    await expectError(requestCall(api, t), 409, 'agent_offline');

    const revived = await heartbeat(api, agent.engineToken);
    expect(revived.status).toBe(200);
    expect(revived.body.engine).toMatchObject({ state: 'ready', live: true });
    expect((await state(agent.widgetToken)).engine).toMatchObject({ state: 'ready', live: true });

    // During a call, a 20 s gap (one missed 15 s heartbeat) ends nothing and orphans nothing.
    const { id } = await connectedCall(agent);
    await h.clock.advanceSeconds(20);
    await tick();
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: false });
    expect((await heartbeat(api, agent.engineToken, { call_id: id, busy: true })).status).toBe(200);
    await h.clock.advanceSeconds(20);
    await tick();
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: false });
    expect((await state(agent.widgetToken)).engine).toMatchObject({ state: 'ready', live: true });
  });

  it('an engine gone silent mid-call orphans the call at 30 s and ends its provider leg at 90 s', async () => {
    const agent = await readyAgent(api, t);
    const simulator = h.services.providers.simulator;
    const { id, claimedAt, answeredAt } = await connectedCall(agent);
    // The last heartbeat was at the claim; the far end is on the line.
    expect(simulator.liveLegs()).toBe(1);

    await h.clock.advanceSeconds(claimedAt + 29 - nowSeconds());
    await tick();
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: false });
    await h.clock.advanceSeconds(1);
    await tick();
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: true });
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, status: 'connected', orphaned: true });

    await h.clock.advanceSeconds(59);
    await tick();
    expect((await callStatus(id)).status).toBe('connected');
    expect(simulator.liveLegs()).toBe(1);

    await h.clock.advanceSeconds(1);
    await tick();
    const ended = await callStatus(id);
    expect(ended.status).toBe('completed');
    expect(ended.answered_at).toBe(answeredAt);
    expect(ended.ended_at).toBe(claimedAt + 90);
    expect(ended.duration).toBe(ended.ended_at - answeredAt);
    expect(ended.duration).toBe(87);
    expect(simulator.liveLegs()).toBe(0);
    const widget = await state(agent.widgetToken);
    expect(widget.engine).toMatchObject({ state: 'offline', live: false });
    expect(widget.call).toMatchObject({ request_id: id, status: 'completed', duration: 87 });
  });

  it('a window closed mid-call leaves an orphaned call that the widget or the backend can hang up', async () => {
    const simulator = h.services.providers.simulator;
    const agent = await readyAgent(api, t);
    const { id } = await connectedCall(agent);

    const closed = await api.post('/engine/close', {}, { auth: agent.engineToken });
    expect(closed.status, JSON.stringify(closed.body)).toBe(200);
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: true });
    const widget = await state(agent.widgetToken);
    expect(widget.call).toMatchObject({ request_id: id, status: 'connected', orphaned: true });
    expect(widget.engine).toMatchObject({ id: agent.engineId, state: 'closed', live: false });
    await expectError(heartbeat(api, agent.engineToken, { call_id: id }), 401, 'unauthorized');
    expect(simulator.liveLegs()).toBe(1);

    const hangup = await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'orphan-hangup' });
    expect(hangup.status, JSON.stringify(hangup.body)).toBe(200);
    expect(hangup.body.status).toBe('done');
    expect(await callStatus(id)).toMatchObject({ status: 'completed', orphaned: false });
    expect(simulator.liveLegs()).toBe(0);

    // A second window, a second call, closed too: this time the backend hangs it up.
    const next = await pair(await launchTicket(api, agent.widgetToken));
    expect(next.status).toBe(201);
    const second: Agent = { widgetToken: agent.widgetToken, engineToken: next.body.engine_token, engineId: next.body.engine.id };
    expect((await heartbeat(api, second.engineToken)).body.engine.state).toBe('ready');
    const call2 = await connectedCall(second);
    expect((await api.post('/engine/close', {}, { auth: second.engineToken })).status).toBe(200);
    expect(await callStatus(call2.id)).toMatchObject({ status: 'connected', orphaned: true });
    const byBackend = await api.post(`/calls/${call2.id}/hangup`, undefined, { auth: t.serverKey });
    expect(byBackend.status, JSON.stringify(byBackend.body)).toBe(200);
    expect(byBackend.body).toMatchObject({ request_id: call2.id, status: 'completed' });
    expect(await callStatus(call2.id)).toMatchObject({ status: 'completed', orphaned: false });
    expect(simulator.liveLegs()).toBe(0);
  });

  it('a heartbeat that does not report the live call orphans it after the grace, and reporting it again clears the flag', async () => {
    const agent = await readyAgent(api, t);
    const { id, claimedAt } = await connectedCall(agent);
    // 3 s after the claim: within the grace, the claim may still be in flight.
    expect((await heartbeat(api, agent.engineToken, { call_id: null })).status).toBe(200);
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: false });

    await h.clock.advanceSeconds(claimedAt + 6 - nowSeconds());
    const forgot = await heartbeat(api, agent.engineToken, { call_id: null });
    expect(forgot.status).toBe(200);
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: true });
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, orphaned: true });

    await h.clock.advanceSeconds(2);
    expect((await heartbeat(api, agent.engineToken, { call_id: id, busy: true })).status).toBe(200);
    expect(await callStatus(id)).toMatchObject({ status: 'connected', orphaned: false });
    expect((await state(agent.widgetToken)).call).toMatchObject({ request_id: id, orphaned: false });
  });

  it('a heartbeat leaves the flag alone on a call that ended while it was being answered, and bumps no version for it', async () => {
    const agent = await readyAgent(api, t);
    const { id, claimedAt } = await connectedCall(agent);
    await h.clock.advanceSeconds(claimedAt + 6 - nowSeconds());
    // The call ends (the far end hangs up) after the report read it live, before its flag is written.
    const { db } = h.services;
    const tx = db.tx.bind(db);
    const ending = vi.spyOn(db, 'tx').mockImplementation((fn, options) =>
      tx(
        (sql) =>
          fn({
            query: async (text: string, params?: readonly unknown[]) => {
              if (text.includes('SET orphaned')) {
                await sql.query(`UPDATE call_intents SET status = 'completed', end_reason = 'far_end', ended_at = $2 WHERE id = $1`, [id, h.clock.now()]);
              }
              return sql.query(text, params);
            },
          } as typeof sql),
        options,
      ),
    );
    const version = async () => (await db.query<{ version: number }>('SELECT version FROM agent_versions WHERE integration_id = $1 AND member_id = $2', [t.integrationId, t.agent.id]))[0]!.version;
    try {
      const before = await version();
      // busy as its last report said: the report itself changes nothing of the engine
      expect((await heartbeat(api, agent.engineToken, { call_id: null, busy: true })).status).toBe(200);
      expect(await callStatus(id)).toMatchObject({ status: 'completed', orphaned: false });
      expect(await version()).toBe(before);
    } finally {
      ending.mockRestore();
    }
  });

  it('an engine token dies after 24 h without a heartbeat', async () => {
    const agent = await readyAgent(api, t);
    await h.clock.advanceSeconds(86_399);
    expect((await api.post('/engine/voice-token', undefined, { auth: agent.engineToken })).status).toBe(200);
    await h.clock.advanceSeconds(1);
    await expectError(api.post('/engine/voice-token', undefined, { auth: agent.engineToken }), 401, 'unauthorized');
    await expectError(heartbeat(api, agent.engineToken), 401, 'unauthorized');
  });

  it('revoking the integration mid-call kills the engine token and ends the call through the provider', async () => {
    const simulator = h.services.providers.simulator;
    const agent = await readyAgent(api, t);
    const { id } = await connectedCall(agent);
    await h.clock.advanceSeconds(10);
    expect(simulator.liveLegs()).toBe(1);

    await revokeIntegration(h.services, t.integrationId);
    await expectError(heartbeat(api, agent.engineToken, { call_id: id }), 401, 'unauthorized');
    await expectError(widgetState(api, agent.widgetToken), 401, 'unauthorized');
    await expectError(api.get(`/calls/${id}`, { auth: t.serverKey }), 401, 'unauthorized');
    expect(simulator.liveLegs()).toBe(0);
    // The key is revoked too, so read the call through the same projection GET /calls/{id} serves.
    const ended = await h.services.calls.get(t.integrationId, id);
    expect(ended).toMatchObject({ status: 'completed', duration: 10, orphaned: false });
  });

  it("revoking the integration while a call rings in ends it unanswered, not as the agent's decline", async () => {
    const own = await seedTenant(h.services);
    await readyAgent(api, own);
    const inbound = await h.services.calls.injectInbound({ integrationId: own.integrationId, from: '+442079460123' });
    expect(inbound.status).toBe('incoming');
    await revokeIntegration(h.services, own.integrationId);
    expect(h.services.providers.simulator.liveLegs()).toBe(0);
    expect(await h.services.calls.get(own.integrationId, inbound.call_id)).toMatchObject({ status: 'no_answer' });
    const [row] = await h.services.db.query<{ end_reason: string }>('SELECT end_reason FROM call_intents WHERE id = $1', [inbound.call_id]);
    expect(row!.end_reason).toBe('integration_revoked');
  });

  it('disabling the member refuses the next engine request with 403 agent_disabled', async () => {
    const agent = await readyAgent(api, t);
    await updateMember(deps(), t.agent.id, { enabled: false });
    await expectError(heartbeat(api, agent.engineToken), 403, 'agent_disabled');
    await expectError(api.post('/engine/voice-token', undefined, { auth: agent.engineToken }), 403, 'agent_disabled');
    await updateMember(deps(), t.agent.id, { enabled: true });
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
  });

  it('five concurrent claims of one intent by its window claim it once and all answer that claim, over 1,000 intents; once its leg started, or for another agent, a claim is 404', async () => {
    const TRIALS = 1000;
    const CLAIMANTS = 5;
    /** intents raced at once; a batch of trials stays under the 600/min per-engine limit */
    const PARALLEL = 10;
    const PER_WINDOW = 100;

    const widgetToken = await openSession(api, t);
    const paired = await pair(await launchTicket(api, widgetToken), false);
    expect(paired.status, JSON.stringify(paired.body)).toBe(201);
    const engineToken: string = paired.body.engine_token;
    const engineId: string = paired.body.engine.id;

    const now = h.clock.now();
    await h.services.db.query(
      `INSERT INTO call_intents (id, integration_id, account_id, member_id, direction, status, phone_number, policy,
         caller_id, per_minute_micros, created_at, expires_at)
       SELECT 'ci_race' || lpad(g::text, 4, '0'), $1, $2, $3, 'outbound', 'queued', $4, $5::jsonb, $6, 10000, $7, $8
       FROM generate_series(1, ${TRIALS}) AS g`,
      [t.integrationId, t.accountId, t.agent.id, '+12025550123', JSON.stringify(paired.body.policy), '+12025550100', now, now + 24 * 3600 * 1000],
    );
    const ids = Array.from({ length: TRIALS }, (_, i) => `ci_race${String(i + 1).padStart(4, '0')}`);
    const agentVersion = async () =>
      (await h.services.db.query<{ version: number }>('SELECT version FROM agent_versions WHERE integration_id = $1 AND member_id = $2', [t.integrationId, t.agent.id]))[0]!.version;
    const versionBefore = await agentVersion();

    const claim = (id: string, token = engineToken) => api.post('/engine/claim', { request_id: id }, { auth: token });
    const anomalies: string[] = [];
    for (let windowStart = 0; windowStart < TRIALS; windowStart += PER_WINDOW) {
      for (let start = windowStart; start < Math.min(windowStart + PER_WINDOW, TRIALS); start += PARALLEL) {
        await Promise.all(
          ids.slice(start, start + PARALLEL).map(async (id) => {
            const replies = await Promise.all(Array.from({ length: CLAIMANTS }, () => claim(id)));
            // A window whose answer was lost asks again and must learn it won (the request is no longer offered to it).
            const same = replies.every((r) => r.status === 200 && r.body.call.request_id === id && r.body.call.status === 'claimed' && r.body.connect.params.To === id);
            if (!same) anomalies.push(`${id}: ${replies.map((r) => `${r.status} ${r.body?.error ?? r.body?.call?.status}`).join(', ')}`);
          }),
        );
      }
      // A new rate window for the next batch of trials.
      await h.clock.advanceSeconds(60);
    }
    expect(anomalies).toEqual([]);
    // Claimed once each: one agent-state change per intent, however many claims answered.
    expect((await agentVersion()) - versionBefore).toBe(TRIALS);
    const [claimed] = await h.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM call_intents WHERE id LIKE 'ci_race%' AND status = 'claimed' AND engine_id = $1`,
      [engineId],
    );
    expect(claimed!.n).toBe(TRIALS);
    // Asked again later, the claim keeps the first one's time: the reaper's connect timeout counts from it.
    const claimedAt = async (id: string) => (await h.services.db.query<{ claimed_at: number }>('SELECT claimed_at FROM call_intents WHERE id = $1', [id]))[0]!.claimed_at;
    const first = await claimedAt(ids[3]!);
    await h.clock.advanceSeconds(5);
    expect((await claim(ids[3]!)).status).toBe(200);
    expect(await claimedAt(ids[3]!)).toBe(first);

    // Its voice leg started: a second connect would place a second leg.
    await h.services.db.query(`UPDATE call_intents SET status = 'dialing', provider_call_sid = 'CA_race_1' WHERE id = $1`, [ids[0]]);
    await expectError(claim(ids[0]!), 404, 'not_found');
    // Another agent's window never claims it, claimed or queued.
    await createMember(deps(), { accountId: t.accountId, email: 'zed@acme.example', name: 'Zed', departmentId: t.salesId });
    const other = await readyAgent(api, t, 'zed@acme.example');
    await expectError(claim(ids[1]!, other.engineToken), 404, 'not_found');
    await h.services.db.query(`UPDATE call_intents SET status = 'queued', engine_id = NULL, claimed_at = NULL WHERE id = $1`, [ids[2]]);
    await expectError(claim(ids[2]!, other.engineToken), 404, 'not_found');
    expect((await claim(ids[2]!)).status).toBe(200);
  }, 300_000);
});

describe.each(storeDrivers())('where engines may run, over REST, on %s', (driver) => {
  const OURS = 'chrome-extension://abcdefghijklmnopabcdefghijklmnop';
  const FOREIGN = 'chrome-extension://ponmlkjihgfedcbaponmlkjihgfedcba';
  let h: Harness;
  let t: Tenant;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver, { extensionOrigins: [OURS] });
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  it("pairs and serves engines from the service's pages, this installation's extensions and non-browser callers; refuses other extensions and sites", async () => {
    const pairFrom = async (origin?: string) => {
      const ticket = await launchTicket(api, await openSession(api, t));
      return api.post('/engine/pair', { ticket, simulated: true, client: 'extension' }, origin ? { origin } : {});
    };
    const foreign = await expectError(pairFrom(FOREIGN), 403, 'origin_not_allowed');
    expect(foreign.body.message).toBe('This extension is not allowed on this server.');
    await expectError(pairFrom('https://evil.example'), 403, 'origin_not_allowed');

    for (const origin of [OURS, h.config.siteUrl, undefined]) {
      const paired = await pairFrom(origin);
      expect(paired.status, `${origin}: ${JSON.stringify(paired.body)}`).toBe(201);
    }
    // The last engine's token: every engine route checks where the request comes from.
    const agent = await readyAgent(api, t);
    await expectError(api.post('/engine/heartbeat', READY, { auth: agent.engineToken, origin: FOREIGN }), 403, 'origin_not_allowed');
    await expectError(api.post('/engine/voice-token', undefined, { auth: agent.engineToken, origin: FOREIGN }), 403, 'origin_not_allowed');
    expect((await api.post('/engine/heartbeat', READY, { auth: agent.engineToken, origin: OURS })).status).toBe(200);
  });
});

describe.each(storeDrivers())('a Twilio service whose operator refuses simulated engines (SIMULATED_ENGINES=refuse), on %s', (driver) => {
  let h: Harness;
  let api: Client;
  beforeAll(async () => {
    // allowed at first: the operator sets refuse once an integrator's CI engine is already paired
    h = await createHarness(driver, { voiceProvider: 'twilio', simulatedEngines: 'allow' });
    api = client(h.app);
  });
  afterAll(() => h.close());

  it('refuses simulated pairings (the ticket left for a real window), and every request of a simulated engine paired before: it goes offline, and calls wait on it no more', async () => {
    const t = await seedTenant(h.services);
    const ci = await readyAgent(api, t, t.agent.email, true);
    h.config.simulatedEngines = 'refuse';
    try {
      const requested = await requestCall(api, t);
      expect(requested.status, JSON.stringify(requested.body)).toBe(202);
      const refusedClaim = await expectError(api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: ci.engineToken }), 401, 'unauthorized');
      expect(refusedClaim.body.message).toContain('SIMULATED_ENGINES');
      await expectError(heartbeat(api, ci.engineToken), 401, 'unauthorized');
      expect((await api.get(`/calls/${requested.body.request_id}`, { auth: t.serverKey })).body.status).toBe('queued');
      // silent, the engine goes offline as any window would: its agent takes no more calls
      await h.clock.advanceSeconds(LIMITS.engineOfflineAfterSeconds + 1);
      await h.services.reaper.tick();
      await expectError(requestCall(api, t), 409, 'agent_offline');

      const ticket = await launchTicket(api, await openSession(api, t));
      const refused = await expectError(api.post('/engine/pair', { ticket, simulated: true }), 422, 'invalid_request');
      expect(refused.body.message).toContain('SIMULATED_ENGINES');
      const paired = await api.post('/engine/pair', { ticket, simulated: false });
      expect(paired.status, JSON.stringify(paired.body)).toBe(201);
      expect(paired.body).toMatchObject({ voice_provider: 'twilio', engine: { simulated: false } });
    } finally {
      h.config.simulatedEngines = 'allow';
    }
  });
});
