/**
 * What other nodes send a gateway's sockets, when Redis cannot carry it (gateway/catch-up.ts), and
 * the order of a socket's snapshot and its room's subscription (Bus.roomsJoined). Two nodes on one
 * store and one Redis server of the test's own, which the test stops, restarts, pauses and resumes:
 * node A takes REST requests (an API node), node B holds the sockets (a gateway).
 */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createMember } from '../../api/domain/operator/accounts.js';
import { createRedisBus, ROOMS_JOINED_WITHIN_MS } from '../../api/bus/redis.js';
import type { Bus } from '../../api/bus/index.js';
import { ManualClock } from '../../api/clock.js';
import { PROBE_EVERY_MS, SILENT_AFTER_MS } from '../../api/redis-liveness.js';
import { LIMITS } from '../../shared/limits.js';
import { EXPIRY_SWEEP_MS } from '../../gateway/endings.js';
import { carry, type Left } from '../../gateway/catch-up.js';
import { openTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { redisUrl, storeDrivers } from '../helpers/env.js';
import { command, openSession, readyAgent, type Agent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { freePort, spawnRedis, waitFor } from '../helpers/processes.js';
import { advanceUntilEnded, openSocket, request, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

/** On PostgreSQL, statements give up after this: a test holds a lock there. */
const STATEMENT_TIMEOUT_MS = 1000;

describe.skipIf(!redisUrl()).each(storeDrivers())('a gateway whose Redis is away, on %s', (driver) => {
  let redis: ReturnType<typeof spawnRedis>;
  let database: TestDatabase;
  let buses: Bus[];
  let a: Harness;
  let b: GatewayHarness;
  let clock: ManualClock;
  /** the clock of the Redis connections' liveness probes */
  let probes: ManualClock;
  let api: Client;
  let t: Tenant;
  let agent: Agent;
  const sockets: TestSocket[] = [];

  const busesAre = (state: 'up' | 'down') => waitFor(async () => (buses.every((bus) => bus.state() === state) ? true : undefined), `both buses ${state}`, 20_000);
  const open = (token: string, origin: string) => {
    const socket = openSocket(b.url, token, origin);
    sockets.push(socket);
    return socket;
  };
  const widget = () => open(agent.widgetToken, ORIGIN);
  const engine = () => open(agent.engineToken, b.h.config.siteUrl);

  beforeEach(async () => {
    const port = await freePort();
    redis = spawnRedis(port);
    await redis.start();
    database = await openTestDatabase(driver, { pg: { statementTimeoutMs: STATEMENT_TIMEOUT_MS } });
    clock = new ManualClock();
    probes = new ManualClock();
    buses = [await createRedisBus(`redis://127.0.0.1:${port}`, clock, probes), await createRedisBus(`redis://127.0.0.1:${port}`, clock, probes)];
    a = await createHarness(driver, {}, { database, bus: buses[0], clock });
    a.services.pusher.start();
    b = await createGatewayHarness(driver, {}, { database, bus: buses[1], clock });
    api = client(a.app);
    t = await seedTenant(a.services);
    agent = await readyAgent(api, t);
  });

  afterEach(async () => {
    for (const socket of sockets.splice(0)) socket.close();
    redis.resume();
    await b.close();
    await a.close();
    for (const bus of buses) await bus.close();
    await database.drop();
    await redis.stop();
  });

  it('sends its sockets what other nodes changed, read from the store every poll_ms, and each state once', async () => {
    const w = widget();
    const first = await snapshotOf(w);
    const e = engine();
    await e.next('work');
    // A second session of the agent, to be revoked on node A during the outage.
    const revokedToken = await openSession(api, t);
    const revoked = open(revokedToken, ORIGIN);
    await revoked.next('state');

    await redis.stop();
    await busesAre('down');
    // From here on only node B's catch-ups reach its sockets. (Before, the set-up's pushes from A
    // may still be arriving as the widget opens, so it can get its opening version more than once:
    // pushes and snapshots race by design, and clients keep the newest.)
    const fromCatchUps = w.events.length;
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'away', available: false })).body).toMatchObject({ ok: true });
    const focus = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'focus-during' });
    expect(focus.body).toMatchObject({ ok: true, status: 'queued' });
    expect((await api.post('/widget/revoke', {}, { auth: revokedToken, origin: ORIGIN })).status).toBe(200);

    const away = w.next('state', { where: (state) => state.version > first.version });
    const work = e.next('work', { where: (next) => next.commands.some((c: { command_id: number }) => c.command_id === focus.body.command_id) });
    const ended = revoked.next('ended');
    await clock.advance(LIMITS.pollMs);
    expect(await away).toMatchObject({ engine: { available: false } });
    await work;
    expect(await ended).toMatchObject({ code: 'unauthorized', final: true });

    // Acked, the command is not sent again; an unchanged state is not sent again either.
    expect(await request(e.socket, 'ack', [{ command_id: focus.body.command_id, result: 'done' }])).toEqual({ ok: true });
    await clock.advance(LIMITS.pollMs);
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'back', available: true })).body).toMatchObject({ ok: true });
    const again = w.next('state', { where: (state) => state.engine.available === true });
    await clock.advance(LIMITS.pollMs);
    await again;
    const stateVersions = (events: TestSocket['events']) => events.filter((event) => event.event === 'state').map((event) => (event.payload as { version: number }).version);
    const before = Math.max(...stateVersions(w.events.slice(0, fromCatchUps)));
    const caughtUp = stateVersions(w.events.slice(fromCatchUps));
    expect(caughtUp).toEqual([before + 1, before + 2]);
    expect(e.events.filter((event) => event.event === 'work' && (event.payload as { commands: Array<{ command_id: number }> }).commands.some((c) => c.command_id === focus.body.command_id))).toHaveLength(1);
  }, 60_000);

  it('catches up as soon as Redis is back, after an outage shorter than poll_ms', async () => {
    const w = widget();
    const first = await snapshotOf(w);
    await redis.stop();
    await busesAre('down');
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'blip', available: false })).body).toMatchObject({ ok: true });
    const caught = w.next('state', { where: (state) => state.version > first.version, timeoutMs: 20_000 });
    await redis.start();
    // no poll_ms has passed on the gateway's clock: the reconnect itself set off the catch-up
    expect(await caught).toMatchObject({ engine: { available: false } });
  }, 60_000);

  it('ends a socket on a token refreshed away during the outage when its grace ends, though the ending was never heard', async () => {
    const old = widget();
    await old.next('state');
    await redis.stop();
    await busesAre('down');
    const refreshedAt = clock.now();
    expect((await api.post('/widget/refresh', undefined, { auth: agent.widgetToken, origin: ORIGIN })).status).toBe(200);
    // Redis is back before the grace ends: only the catch-up's re-check can tell the gateway when it does.
    await redis.start();
    await busesAre('up');
    // Up to 2 s before the grace ends in one leap, which ends nothing yet; then a second at a time
    // (each step waits for what the sweep and the re-checks do).
    await clock.advance(refreshedAt + (LIMITS.widgetTokenRefreshGraceSeconds - 2) * 1000 - clock.now());
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(old.events.map((event) => event.event)).not.toContain('ended');
    expect(await advanceUntilEnded(clock, old, EXPIRY_SWEEP_MS)).toMatchObject({ code: 'token_expired', final: false });
    expect(clock.now() - refreshedAt).toBeGreaterThanOrEqual(LIMITS.widgetTokenRefreshGraceSeconds * 1000);
    expect(clock.now() - refreshedAt).toBeLessThanOrEqual((LIMITS.widgetTokenRefreshGraceSeconds + 3) * 1000);
  }, 60_000);

  it('catches up when Redis stops answering without closing its connections', async () => {
    const w = widget();
    const first = await snapshotOf(w);
    // Paused, Redis keeps every connection open and answers nothing: only the probes can tell.
    redis.pause();
    expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'frozen', available: false })).body).toMatchObject({ ok: true });
    await probes.advance(PROBE_EVERY_MS + SILENT_AFTER_MS);
    await busesAre('down');
    const caught = w.next('state', { where: (state) => state.version > first.version });
    await clock.advance(LIMITS.pollMs);
    expect(await caught).toMatchObject({ engine: { available: false } });

    redis.resume();
    await busesAre('up');
  }, 60_000);

  it("pushes a node's own changes to its own sockets at once while Redis is frozen, before anything notices", async () => {
    const w = widget();
    const first = await snapshotOf(w);
    const e = engine();
    await e.next('work');
    // Paused, Redis keeps every connection open and answers nothing; the probes' clock stands still,
    // so nothing takes Redis for down: the SPUBLISH of each push waits unanswered.
    redis.pause();
    const away = w.next('state', { where: (state) => state.version > first.version, timeoutMs: 3000 });
    expect(await request(w.socket, 'command', { kind: 'availability', request_id: 'own-node', available: false })).toMatchObject({ ok: true });
    expect(await away).toMatchObject({ engine: { available: false } });
    const focus = await request(w.socket, 'command', { kind: 'focus', request_id: 'own-node-focus' });
    expect(await e.next('work', { where: (next) => next.commands.some((c: { command_id: number }) => c.command_id === focus.command_id), timeoutMs: 3000 })).toBeTruthy();
    expect(buses.every((bus) => bus.state() === 'up')).toBe(true);
  }, 60_000);

  // PGlite has one connection, so only PostgreSQL can hold a lock against the catch-up.
  if (driver === 'pg') {
    it('makes the catch-up again when the store could not answer it', async () => {
      const w = widget();
      const first = await snapshotOf(w);
      await redis.stop();
      await busesAre('down');
      expect((await command(api, agent.widgetToken, { kind: 'availability', request_id: 'stuck', available: false })).body).toMatchObject({ ok: true });
      // Another connection holds the agents' versions, so the WidgetState read of the catch-up that
      // Redis's return sets off waits past the statement timeout and fails.
      const other = new pg.Client({ connectionString: database.url });
      await other.connect();
      const lockWaits = async () =>
        Number((await other.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n);
      // Node B catches up when it is back on Redis, and again when it hears that node A is (unless
      // A was back first). The lock is held until both are back and every catch-up has given up.
      const back = new Set<Bus>();
      const unsubscribe = buses.map((bus) => bus.subscribe((message, { local }) => void (message.type === 'resync' && local && back.add(bus))));
      try {
        await other.query('BEGIN; LOCK TABLE agent_versions IN ACCESS EXCLUSIVE MODE');
        await redis.start();
        await waitFor(async () => (back.size === buses.length ? true : undefined), 'both nodes back on Redis');
        await waitFor(async () => ((await lockWaits()) > 0 ? true : undefined), 'the catch-up to wait on the lock');
        // No read waits now, nor half a statement timeout later: a catch-up that follows another
        // at once would by then be waiting on the lock.
        await waitFor(async () => {
          if ((await lockWaits()) > 0) return undefined;
          await new Promise((resolve) => setTimeout(resolve, STATEMENT_TIMEOUT_MS / 2));
          return (await lockWaits()) === 0 ? true : undefined;
        }, 'its reads to give up');
      } finally {
        for (const stop of unsubscribe) stop();
        await other.query('ROLLBACK');
        await other.end();
      }
      const newer = (event: TestSocket['events'][number]) => event.event === 'state' && (event.payload as { version: number }).version > first.version;
      expect(w.events.some(newer)).toBe(false);
      const caught = w.next('state', { where: (state) => state.version > first.version });
      await clock.advance(LIMITS.pollMs);
      expect(await caught).toMatchObject({ engine: { available: false } });
    }, 60_000);
  }

  it('makes again only what a catch-up could not do, not the whole of it', async () => {
    const deps = { db: a.services.db, bus: a.services.bus, clock };
    const bea = await createMember(deps, { accountId: t.accountId, email: 'bea@acme.example', name: 'Bea', departmentId: t.salesId });
    const beaWidget = open(await openSession(api, t, 'bea@acme.example'), ORIGIN);
    await Promise.all([snapshotOf(widget()), snapshotOf(beaWidget), engine().next('work')]);
    const { pusher } = b.h.services;
    const agentState = pusher.agentState.bind(pusher);
    let beaFails = true;
    /** reads under way, and when the last one began: the catch-ups of the return are over once none has for a while */
    let reading = 0;
    let lastReadAt = 0;
    const states = vi.spyOn(pusher, 'agentState').mockImplementation(async (integrationId, memberId) => {
      reading += 1;
      lastReadAt = Date.now();
      try {
        if (memberId === bea.id && beaFails) throw new Error('the store did not answer this one');
        return await agentState(integrationId, memberId);
      } finally {
        reading -= 1;
      }
    });
    const work = vi.spyOn(pusher, 'engineWork');
    const statesOf = (memberId: string) => states.mock.calls.filter(([, member]) => member === memberId).length;
    await redis.stop();
    await busesAre('down');
    await redis.start();
    await busesAre('up');
    // the catch-ups of the return (node B's own, and on hearing node A's) read every agent's state and every window's work
    await waitFor(async () => (statesOf(t.agent.id) > 0 && statesOf(bea.id) > 0 && work.mock.calls.length > 0 ? true : undefined), 'the catch-up of the return');
    // The second (on hearing node A's return) may come later on a busy machine: wait until the reads have been still for 2 s.
    await waitFor(async () => (reading === 0 && Date.now() - lastReadAt > 2000 ? true : undefined), 'the catch-ups of the return to end', 20_000);
    states.mockClear();
    work.mockClear();
    // the next one, poll_ms later, reads Bea's state alone, since it alone failed
    await clock.advance(LIMITS.pollMs);
    await waitFor(async () => (statesOf(bea.id) > 0 ? true : undefined), "the catch-up of what failed");
    expect(statesOf(t.agent.id)).toBe(0);
    expect(work).not.toHaveBeenCalled();
    // once it succeeds, nothing more is read
    beaFails = false;
    await clock.advance(LIMITS.pollMs);
    await waitFor(async () => (statesOf(bea.id) > 1 ? true : undefined), 'the catch-up that succeeds');
    await clock.advance(LIMITS.pollMs);
    // (a catch-up that found nothing left to do reads nothing: give a wrong one time to show itself)
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(statesOf(bea.id)).toBe(2);
    expect(statesOf(t.agent.id)).toBe(0);
  }, 60_000);

  it("reads a socket's snapshot only once Redis has its room, so a change made meanwhile is in it", async () => {
    // Paused, Redis keeps the connections but answers nothing: node B's subscription to the new
    // room waits in it.
    redis.pause();
    const w = widget();
    // Connected, the socket has joined its room: the gateway joins it as the connection is made.
    await w.next('connect');
    // A change whose push reaches no one, as a push that reached Redis before the subscription
    // would not: node C has a bus of its own.
    const c = await createHarness(driver, {}, { database, clock });
    try {
      expect((await command(client(c.app), agent.widgetToken, { kind: 'availability', request_id: 'meanwhile', available: false })).body).toMatchObject({ ok: true });
    } finally {
      await c.close();
    }
    const current = w.next('state', { where: (state) => state.engine.available === false });
    redis.resume();
    // Read before the subscription took effect, the snapshot would predate the change.
    await current;
  }, 30_000);

  it('sends the snapshot anyway when Redis does not answer for ROOMS_JOINED_WITHIN_MS', async () => {
    redis.pause();
    const w = widget();
    await w.next('connect');
    // Redis stays paused: only the bound can let the snapshot go.
    await waitFor(async () => {
      await clock.advance(ROOMS_JOINED_WITHIN_MS / 4);
      return w.events.some((event) => event.event === 'state') ? true : undefined;
    }, 'the snapshot');
    expect(w.events.find((event) => event.event === 'state')?.payload).toMatchObject({ ok: true, engine: { available: true } });
  }, 30_000);
});

describe('what a catch-up leaves to do (gateway/catch-up.ts, carry)', () => {
  const left = (rooms: string[] = [], engines: string[] = [], rechecks: string[] = []): Left => ({ rooms: new Set(rooms), engines: new Set(engines), rechecks: new Set(rechecks) });
  const asLists = (scope: ReturnType<typeof carry>) => (scope === 'all' ? 'all' : { rooms: [...scope.rooms].sort(), engines: [...scope.engines].sort(), rechecks: [...scope.rechecks].sort() });

  it('keeps what an earlier pass left and a later, narrower pass did not cover', () => {
    // a full pass left room R1; a pass queued meanwhile for R0 alone succeeded: R1 is still to do
    expect(asLists(carry(left(['R1']), left(['R0']), left()))).toEqual({ rooms: ['R1'], engines: [], rechecks: [] });
    // what the later pass covered and did again is done, or left again if it failed again
    expect(asLists(carry(left(['R0', 'R1'], ['E1']), left(['R0']), left()))).toEqual({ rooms: ['R1'], engines: ['E1'], rechecks: [] });
    expect(asLists(carry(left(['R0']), left(['R0']), left(['R0'])))).toEqual({ rooms: ['R0'], engines: [], rechecks: [] });
  });

  it('takes a full pass as the whole answer, and keeps everything to do after a pass that could not run', () => {
    expect(asLists(carry(left(['R1']), 'all', left(['R2'])))).toEqual({ rooms: ['R2'], engines: [], rechecks: [] });
    expect(carry('all', left(['R0']), left())).toBe('all');
    expect(carry(left(), left(['R0']), 'all')).toBe('all');
  });
});

