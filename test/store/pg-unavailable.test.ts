/**
 * A PostgreSQL that stops answering in time (api/store/pg.ts): a statement stuck behind a lock, a
 * pool with no free connection. Callers get 503 service_unavailable, never a wait without end or a
 * 500, and the pool goes on once the database answers again. Migrations are exempt: they may wait
 * for another node's, and run long.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../api/store/migrate.js';
import { CLOSE_WAIT_MS, openPg } from '../../api/store/pg.js';
import { connectStore } from '../../api/store/index.js';
import { loadConfig } from '../../api/config.js';
import { C2CError } from '../../shared/errors.js';
import { storeDrivers } from '../helpers/env.js';
import { createPgDatabase, openTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { command, heartbeat, readyAgent, requestCall, widgetState } from '../helpers/flows.js';
import { createReaper } from '../../api/domain/reaper.js';
import { LIMITS } from '../../shared/limits.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { createGatewayHarness } from '../helpers/gateway.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';
import { waitFor } from '../helpers/processes.js';
import { tcpProxy } from '../helpers/tcp-proxy.js';

const unavailable = expect.objectContaining({ code: 'service_unavailable', status: 503 });

/** A second connection to the database, to hold locks the way a stuck job would. */
async function otherConnection(url: string) {
  const other = new pg.Client({ connectionString: url });
  await other.connect();
  return other;
}

describe.skipIf(!storeDrivers().includes('pg'))('closing the PostgreSQL store', () => {
  it('cuts, after CLOSE_WAIT_MS, the connections of statements still running, rather than wait for them (a stopping node has a bound)', async () => {
    const database = await createPgDatabase();
    try {
      const db = await openPg(database.url, { statementTimeoutMs: 30_000 });
      // a statement a stopping node gave up on, still running on a struggling store
      expect(CLOSE_WAIT_MS).toBeLessThan(5_000);
      const stuck = db.query('SELECT pg_sleep(5)');
      const outcome = stuck.then(
        () => 'finished',
        () => 'cut',
      );
      await new Promise((resolve) => setTimeout(resolve, 200)); // under way
      await db.close();
      // closed before the statement could finish: it was cut, not waited for
      expect(await outcome).toBe('cut');
    } finally {
      await database.drop();
    }
  }, 30_000);

  it('waits for a statement that ends within CLOSE_WAIT_MS', async () => {
    const database = await createPgDatabase();
    try {
      const db = await openPg(database.url);
      const quick = db.query<{ ok: number }>('SELECT 1 AS ok FROM pg_sleep(0.3)');
      await new Promise((resolve) => setTimeout(resolve, 50));
      await db.close();
      expect(await quick).toEqual([{ ok: 1 }]);
    } finally {
      await database.drop();
    }
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('whether the database server answers at all (Db.reachable, for gateway/isolation.ts)', () => {
  it('is true for a server that answers and for a port its host refuses (PostgreSQL stopped, seen alike by every node); false through a cut network, and true once mended', async () => {
    const database = await openTestDatabase('pg');
    const link = await tcpProxy(database.url!);
    const throughLink = await openPg(link.url);
    try {
      expect(await database.db.reachable!()).toBe(true);
      expect(await throughLink.reachable!()).toBe(true);
      link.cut = true;
      expect(await throughLink.reachable!()).toBe(false);
      link.cut = false;
      expect(await throughLink.reachable!()).toBe(true);
      await link.close(); // nothing listens on its port any more: the host refuses it
      expect(await throughLink.reachable!()).toBe(true);
    } finally {
      await throughLink.close();
      await link.close();
      await database.drop();
    }
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('PostgreSQL not answering in time', () => {
  let database: TestDatabase;

  beforeAll(async () => {
    database = await openTestDatabase('pg', { pg: { max: 2, statementTimeoutMs: 1_000, connectTimeoutMs: 1_000 } });
  });
  afterAll(() => database.drop());

  it('fails a statement stuck past the statement timeout as service_unavailable, and goes on', async () => {
    const other = await otherConnection(database.url!);
    try {
      await other.query('BEGIN; LOCK TABLE accounts IN ACCESS EXCLUSIVE MODE');
      const stuck = database.db.query('SELECT count(*) FROM accounts');
      await expect(stuck).rejects.toBeInstanceOf(C2CError);
      await expect(stuck).rejects.toEqual(unavailable);
      // inside a transaction too
      await expect(database.db.tx((sql) => sql.query('SELECT count(*) FROM accounts'))).rejects.toEqual(unavailable);
      await other.query('ROLLBACK');
      expect(await database.db.query('SELECT count(*)::int AS n FROM accounts')).toEqual([{ n: 0 }]);
    } finally {
      await other.end();
    }
  });

  it('fails as service_unavailable, and counts, however the network or the server says it is out of reach: a name that does not resolve for now, a network down, a server shutting down or dropping the database', async () => {
    const connect = pg.Pool.prototype.connect;
    try {
      for (const code of ['EAI_AGAIN', 'ENETUNREACH', 'ENOTFOUND', '57P04', '57P05', '08006']) {
        pg.Pool.prototype.connect = function () {
          return Promise.reject(Object.assign(new Error(`connect ${code}`), { code }));
        } as typeof connect;
        const before = database.db.unavailableCount();
        await expect(database.db.query('SELECT 1'), code).rejects.toEqual(unavailable);
        expect(database.db.unavailableCount(), code).toBe(before + 1);
      }
      // a protocol violation is a client's bug, not an outage: passed on as it is (a 500)
      pg.Pool.prototype.connect = function () {
        return Promise.reject(Object.assign(new Error('protocol violation'), { code: '08P01' }));
      } as typeof connect;
      await expect(database.db.query('SELECT 1')).rejects.toMatchObject({ code: '08P01' });
    } finally {
      pg.Pool.prototype.connect = connect;
    }
    expect(await database.db.query('SELECT 1 AS n')).toEqual([{ n: 1 }]);
  });

  it('fails waiting past the connect timeout for a connection as service_unavailable, and goes on', async () => {
    const releases: Array<() => void> = [];
    const held = [0, 1].map(() => database.db.tx(() => new Promise<void>((resolve) => releases.push(resolve))));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await expect(database.db.query('SELECT 1')).rejects.toEqual(unavailable);
    await expect(database.db.tx((sql) => sql.query('SELECT 1'))).rejects.toEqual(unavailable);
    for (const release of releases) release();
    await Promise.all(held);
    expect(await database.db.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });

  it('fails a statement whose answer never comes (the network cut) as service_unavailable, and goes on with new connections', async () => {
    // A proxy to PostgreSQL that can stop passing bytes, as a network partition does: the server's
    // own statement timeout can then never reach us.
    const link = await tcpProxy(database.url!);
    // one connection: one left in doubt in the pool would fail every statement after it
    const db = await openPg(link.url, { max: 1, statementTimeoutMs: 1_000, queryTimeoutMs: 1_500, connectTimeoutMs: 2_000 });
    const whileCut = async <T>(work: () => Promise<T>) => {
      link.cut = true;
      try {
        return await work();
      } finally {
        link.cut = false;
      }
    };
    try {
      expect(await db.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      // a statement on the pool
      await expect(whileCut(() => db.query('SELECT 1'))).rejects.toEqual(unavailable);
      expect(await db.query('SELECT 2 AS two')).toEqual([{ two: 2 }]);
      // a statement inside a transaction
      const cutInside = db.tx(async (sql) => {
        await sql.query('SELECT 1');
        await whileCut(() => sql.query('SELECT 2'));
      });
      await expect(cutInside).rejects.toEqual(unavailable);
      expect(await db.query('SELECT 3 AS three')).toEqual([{ three: 3 }]);
      // a transaction that fails on its own while the link is cut: its ROLLBACK gets no answer
      const failsWhileCut = db.tx(async (sql) => {
        await sql.query('SELECT 1');
        link.cut = true;
        throw new Error('a domain failure');
      });
      await expect(failsWhileCut).rejects.toThrow('a domain failure');
      link.cut = false;
      expect(await db.query('SELECT 4 AS four')).toEqual([{ four: 4 }]);
      expect(await db.tx((sql) => sql.query('SELECT 5 AS five'))).toEqual([{ five: 5 }]);
    } finally {
      await db.close();
      await link.close();
    }
  });

  it('answers a transaction PostgreSQL ended to break a deadlock 503, to retry, not 500; the retry succeeds', async () => {
    const other = await otherConnection(database.url!);
    try {
      await database.db.exec("CREATE TABLE IF NOT EXISTS pair_of_rows (id int PRIMARY KEY, n int); INSERT INTO pair_of_rows VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING");
      // the other transaction waits long before looking for deadlocks: ours finds it, and gives way
      await other.query("BEGIN; SET LOCAL deadlock_timeout = '10s'; UPDATE pair_of_rows SET n = n + 1 WHERE id = 2");
      const ours = database.db.tx(async (sql) => {
        await sql.query("SET LOCAL deadlock_timeout = '100ms'");
        await sql.query('UPDATE pair_of_rows SET n = n + 1 WHERE id = $1', [1]);
        await sql.query('UPDATE pair_of_rows SET n = n + 1 WHERE id = $1', [2]);
      });
      const outcome = ours.then(() => 'committed', (error: unknown) => error);
      await new Promise((resolve) => setTimeout(resolve, 50));
      const theirs = other.query('UPDATE pair_of_rows SET n = n + 1 WHERE id = 1');
      expect(await outcome).toEqual(expect.objectContaining({ code: 'service_unavailable', status: 503, retryAfter: 1 }));
      await theirs;
      await other.query('COMMIT');
      await database.db.tx(async (sql) => {
        await sql.query('UPDATE pair_of_rows SET n = n + 1 WHERE id = $1', [1]);
        await sql.query('UPDATE pair_of_rows SET n = n + 1 WHERE id = $1', [2]);
      });
      expect(await database.db.query('SELECT id, n FROM pair_of_rows ORDER BY id')).toEqual([{ id: 1, n: 2 }, { id: 2, n: 2 }]);
    } finally {
      await other.end();
    }
  });

  it("gives up a migration waiting on a long transaction's lock rather than queue every statement behind it, and applies it once that is over", async () => {
    const fresh = await openTestDatabase('pg');
    const [holder, reader] = [await otherConnection(fresh.url!), await otherConnection(fresh.url!)];
    try {
      // the last migration not applied yet, as on a database a new version is deployed to
      await fresh.db.exec("ALTER TABLE call_intents DROP COLUMN abandoned_retry_at, DROP COLUMN abandoned_retry_ms; DELETE FROM schema_migrations WHERE name = '010_abandoned_retry.sql'");
      // a report someone left running in a transaction holds a lock on the table
      await holder.query('BEGIN; SELECT count(*) FROM call_intents');
      const wait = { timeoutMs: 300, attempts: 2, pauseMs: 100 };
      const migrating = migrate(fresh.db, wait);
      const outcome = migrating.then(() => 'applied', (error: Error) => error.message);
      // meanwhile the table's other readers go on: no ALTER waits at the head of its queue for long
      await new Promise((resolve) => setTimeout(resolve, 50));
      const started = Date.now();
      await reader.query('SELECT count(*) FROM call_intents');
      expect(Date.now() - started).toBeLessThan(3000); // not for as long as the report runs
      expect(await outcome).toMatch(/010_abandoned_retry\.sql was not applied: its tables stayed locked/);
      await holder.query('COMMIT');
      expect(await migrate(fresh.db, wait)).toEqual(['010_abandoned_retry.sql']);
    } finally {
      await holder.end();
      await reader.end();
      await fresh.drop();
    }
  });

  it("lets a migration wait for another node's past the statement timeout", async () => {
    const fresh = await openTestDatabase('pg', { migrate: false, pg: { statementTimeoutMs: 300 } });
    const other = await otherConnection(fresh.url!);
    try {
      // another node is migrating: it holds the migration lock for longer than the timeout
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock(726317001)');
      const migrating = migrate(fresh.db);
      await new Promise((resolve) => setTimeout(resolve, 600));
      await other.query('COMMIT');
      expect((await migrating).length).toBeGreaterThan(0);
    } finally {
      await other.end();
      await fresh.drop();
    }
  });
});

describe.skipIf(!storeDrivers().includes('pg'))("a node serving while another node's migration adds a column (a rolling deploy)", () => {
  it('runs its statements prepared before on the new table: at once outside a transaction, and inside one after at most one 503', async () => {
    const database = await openTestDatabase('pg', { pg: { max: 2 } });
    const other = await otherConnection(database.url!);
    try {
      const { db } = database;
      await db.exec('CREATE TABLE rolling (id int PRIMARY KEY); INSERT INTO rolling VALUES (1)');
      const read = () => db.query('SELECT * FROM rolling WHERE id = $1', [1]);
      const readInTx = () => db.tx((sql) => sql.query('SELECT * FROM rolling WHERE id = $1', [1]));
      // both connections hold the statement, prepared for the table as it is
      await Promise.all([readInTx(), readInTx()]);
      await other.query('ALTER TABLE rolling ADD COLUMN added text');
      const outcomes = [];
      for (let n = 0; n < 4; n += 1) outcomes.push(await readInTx().then((rows) => rows, (error: unknown) => error));
      const refused = outcomes.filter((outcome) => !Array.isArray(outcome));
      expect(refused.length).toBeLessThanOrEqual(1);
      for (const refusal of refused) expect(refusal).toEqual(expect.objectContaining({ code: 'service_unavailable', status: 503, retryAfter: 1 }));
      expect(outcomes.at(-1)).toEqual([{ id: 1, added: null }]);
      await other.query('ALTER TABLE rolling ADD COLUMN again int');
      expect(await read()).toEqual([{ id: 1, added: null, again: null }]);
      expect(await readInTx().catch(() => readInTx())).toEqual([{ id: 1, added: null, again: null }]);
    } finally {
      await other.end();
      await database.drop();
    }
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('the connections a node holds', () => {
  it('are at most DATABASE_POOL_SIZE, however many statements run at once', async () => {
    const database = await openTestDatabase('pg');
    const config = loadConfig({ DATABASE_URL: database.url!, DATABASE_POOL_SIZE: '3' });
    const db = await connectStore(config);
    try {
      const pids = await Promise.all(Array.from({ length: 9 }, () => db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_sleep(0.05)')));
      expect(new Set(pids.map(([row]) => row!.pid)).size).toBe(3);
    } finally {
      await db.close();
      await database.drop();
    }
    expect(() => loadConfig({ DATABASE_POOL_SIZE: '1' })).toThrow(/DATABASE_POOL_SIZE/);
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('a gateway whose PostgreSQL does not answer', () => {
  it('says so on /healthz (503, in the envelope), as the API does, and recovers with it', async () => {
    const database = await openTestDatabase('pg', { pg: { max: 1, statementTimeoutMs: 1_000, connectTimeoutMs: 300 } });
    const live = await createGatewayHarness('pg', {}, { database });
    let release: () => void = () => {};
    try {
      const health = () => fetch(`${live.url}/healthz`);
      expect(await (await health()).json()).toMatchObject({ ok: true, role: 'gateway', store: 'pg' });
      const held = database.db.tx(() => new Promise<void>((resolve) => (release = resolve))); // the only connection
      const refused = await health();
      expect(refused.status).toBe(503);
      expect(await refused.json()).toEqual({ ok: false, error: 'service_unavailable', message: 'The database is not answering; retry shortly.' });
      release();
      await held;
      expect((await health()).status).toBe(200);
    } finally {
      release();
      await live.close();
      await database.drop();
    }
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('a PostgreSQL that takes no changes (a standby after a failover, a database set read-only)', () => {
  it('answers writes 503 service_unavailable, not 500; both /healthz say so; all recover once it is writable', async () => {
    const database = await openTestDatabase('pg');
    const live = await createGatewayHarness('pg', {}, { database });
    const admin = await otherConnection(database.url!);
    const name = new URL(database.url!).pathname.slice(1);
    /**
     * New connections read-only or not. Turned on, the pool's are cut, so its next ones are made so
     * (as a failover does); turned off, they are left as they are, read-only sessions in the pool
     * (as an operator's RESET leaves them): the node must replace them itself.
     */
    const readOnly = async (on: boolean) => {
      await admin.query(`ALTER DATABASE ${name} ${on ? 'SET default_transaction_read_only = on' : 'RESET default_transaction_read_only'}`);
      if (on) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
    };
    try {
      const api = client(live.h.app);
      const t = await seedTenant(live.h.services);
      const session = () => api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey });
      const apiHealth = () => live.h.app.inject({ method: 'GET', url: '/healthz' });
      const gatewayHealth = () => fetch(`${live.url}/healthz`);
      expect((await session()).status).toBe(201);
      expect((await apiHealth()).statusCode).toBe(200);

      await readOnly(true);
      const readOnlyNow = { ok: false, error: 'service_unavailable', message: 'The database takes no changes now (read-only); retry shortly.' };
      // the first statements may meet a connection the cut has not yet removed from the pool: 503 too
      await waitFor(async () => ((await apiHealth()).json().message === readOnlyNow.message ? true : undefined), 'the API to report the read-only store', 5000);
      const refused = await session();
      expect(refused.status).toBe(503);
      expect(refused.body).toEqual(readOnlyNow);
      const health = await apiHealth();
      expect(health.statusCode).toBe(503);
      expect(health.json()).toEqual(readOnlyNow);
      const gateway = await gatewayHealth();
      expect(gateway.status).toBe(503);
      expect(await gateway.json()).toEqual(readOnlyNow);

      await readOnly(false);
      await waitFor(async () => ((await apiHealth()).statusCode === 200 ? true : undefined), 'the API to be healthy again', 5000);
      expect((await session()).status).toBe(201);
      expect((await gatewayHealth()).status).toBe(200);
    } finally {
      await admin.query(`ALTER DATABASE ${name} RESET default_transaction_read_only`).catch(() => {});
      await admin.end();
      await live.close();
      await database.drop();
    }
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('a store that keeps failing now and then', () => {
  it('puts off judging silent windows for at most five minutes, then ends the calls of the dead ones', async () => {
    // two connections, given up on after 400 ms: holding both makes the next statement fail soon
    // (100 ms was too short for a new connection on a loaded machine, the set-up's own included)
    const database = await openTestDatabase('pg', { pg: { max: 2, connectTimeoutMs: 400 } });
    const h = await createHarness('pg', {}, { database });
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const id = (await requestCall(api, t)).body.request_id as string;
      await heartbeat(api, agent.engineToken);
      expect((await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
      await heartbeat(api, agent.engineToken, { call_id: id });
      await h.clock.advanceSeconds(3);
      const status = async () => ((await api.get(`/calls/${id}`, { auth: t.serverKey })).body as { status: string }).status;
      expect(await status()).toBe('connected');

      // The window dies; the store fails a statement every 15 s, and answers the rest.
      /** Holds one of the pool's connections in a transaction; a connect the busy machine made take over 400 ms is tried again. */
      const holdConnection = async (): Promise<{ release: () => void; done: Promise<void> }> => {
        for (;;) {
          const held = await new Promise<{ release: () => void; done: Promise<void> } | null>((resolve) => {
            const done = database.db.tx(() => new Promise<void>((release) => resolve({ release, done })));
            done.catch(() => resolve(null));
          });
          if (held) return held;
        }
      };
      const failOnce = async () => {
        const held = [await holdConnection(), await holdConnection()];
        await expect(database.db.query('SELECT 1')).rejects.toEqual(unavailable);
        for (const { release } of held) release();
        await Promise.all(held.map(({ done }) => done));
      };
      const endedAfter: number[] = [];
      for (let second = 15; second <= 7 * 60; second += 15) {
        await h.clock.advanceSeconds(15);
        await failOnce();
        await h.services.reaper.tick();
        if ((await status()) !== 'connected') endedAfter.push(second);
      }
      // silent for 90 s it would have ended at once; it ends once judging has been put off for five minutes
      expect(endedAfter[0]).toBeGreaterThan(LIMITS.storeTroubleMaxSeconds);
      expect(endedAfter[0]).toBeLessThanOrEqual(LIMITS.storeTroubleMaxSeconds + 30);
    } finally {
      await h.close();
      await database.drop();
    }
  }, 90_000);
});

describe.skipIf(!storeDrivers().includes('pg'))('the API while PostgreSQL is stuck', () => {
  let database: TestDatabase;
  let h: Harness;
  let t: Tenant;

  beforeAll(async () => {
    database = await openTestDatabase('pg', { pg: { statementTimeoutMs: 1_000, connectTimeoutMs: 2_000 } });
    h = await createHarness('pg', {}, { database });
    t = await seedTenant(h.services);
  });
  afterAll(async () => {
    await h.close();
    await database.drop();
  });

  /** c2c_store_unavailable_total on this node's /metrics */
  const unavailableTotal = async () => {
    const text = (await client(h.app).get('//metrics')).body as string;
    return Number(/^c2c_store_unavailable_total (\d+)$/m.exec(text)?.[1]);
  };

  it('answers 503 service_unavailable with Retry-After, counts it on /metrics, then serves again', async () => {
    const api = client(h.app);
    const before = await unavailableTotal();
    expect(before).toBeGreaterThanOrEqual(0);
    const body = { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN };
    const other = await otherConnection(database.url!);
    try {
      await other.query('BEGIN; LOCK TABLE widget_sessions IN ACCESS EXCLUSIVE MODE');
      const refused = await api.post('/sessions', body, { auth: t.serverKey });
      expect(refused.status).toBe(503);
      expect(refused.body).toEqual({ ok: false, error: 'service_unavailable', message: 'The database is not answering; retry shortly.' });
      expect(refused.headers['retry-after']).toBe('1');
      expect(await unavailableTotal()).toBeGreaterThan(before);
      await other.query('ROLLBACK');
      expect((await api.post('/sessions', body, { auth: t.serverKey })).status).toBe(201);
    } finally {
      await other.end();
    }
  });

  it('runs a hangup again on a replay when the database failed it the first time', async () => {
    const api = client(h.app);
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t);
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const hangup = { kind: 'hangup', request_id: 'hangup-during-outage' };
    const other = await otherConnection(database.url!);
    try {
      // the agent's version cannot be bumped: ending the call cannot commit
      await other.query('BEGIN; LOCK TABLE agent_versions IN EXCLUSIVE MODE');
      const failed = await command(api, agent.widgetToken, hangup);
      expect(failed.status).toBe(503);
      expect(failed.body).toMatchObject({ error: 'service_unavailable' });
      await other.query('ROLLBACK');
    } finally {
      await other.end();
    }
    // the window heartbeats meanwhile: the server's hangup is not handed to it as work
    const beat = await heartbeat(api, agent.engineToken);
    expect(beat.status, JSON.stringify(beat.body)).toBe(200);
    expect((beat.body as { commands: Array<{ kind: string }> }).commands.map((c) => c.kind)).not.toContain('hangup');
    // the client retries as told, with the same request_id: the hangup runs, once
    const retried = await command(api, agent.widgetToken, hangup);
    expect(retried.body).toMatchObject({ ok: true, status: 'done' });
    expect((await command(api, agent.widgetToken, hangup)).body).toEqual(retried.body);
    const call = await api.get(`/calls/${(requested.body as { request_id: string }).request_id}`, { auth: t.serverKey });
    expect(call.body).toMatchObject({ status: 'canceled' });
  });

  it("does not keep a widget token's check that failed for want of the database", async () => {
    const api = client(h.app);
    const session = await api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey });
    const token = (session.body as { widget_token: string }).widget_token;
    const state = () => api.get('/widget/state', { auth: token, origin: ORIGIN });
    // the agent's checks are read again (a member change), while the members table is locked
    h.services.bus.publish({ type: 'member', memberId: t.agent.id });
    const other = await otherConnection(database.url!);
    try {
      await other.query('BEGIN; LOCK TABLE members IN ACCESS EXCLUSIVE MODE');
      expect((await state()).status).toBe(503);
      await other.query('ROLLBACK');
    } finally {
      await other.end();
    }
    expect((await state()).status).toBe(200);
  });

  it('ends no call and takes no window offline for the silence an outage imposed, and judges silence again once the store has answered a while', async () => {
    const api = client(h.app);
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t);
    const id = (requested.body as { request_id: string }).request_id;
    await heartbeat(api, agent.engineToken);
    expect((await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
    await heartbeat(api, agent.engineToken, { call_id: id });
    await h.clock.advanceSeconds(3);
    const call = async () => (await api.get(`/calls/${id}`, { auth: t.serverKey })).body as { status: string; orphaned: boolean };
    expect(await call()).toMatchObject({ status: 'connected', orphaned: false });

    // The store stops answering for over 90 s (here: what touches engines): the window's heartbeats fail.
    const other = await otherConnection(database.url!);
    try {
      await other.query('BEGIN; LOCK TABLE engines IN ACCESS EXCLUSIVE MODE');
      for (let second = 0; second < 95; second += 19) {
        await h.clock.advanceSeconds(19);
        expect((await heartbeat(api, agent.engineToken, { call_id: id })).status).toBe(503);
        // the reaper runs on, and its tick fails where it reads the engines (nothing is judged from that)
        await expect(h.services.reaper.tick()).rejects.toEqual(unavailable);
      }
      await other.query('ROLLBACK');
    } finally {
      await other.end();
    }

    // It answers again: the reaper runs before the window's next heartbeat, and judges no silence.
    await h.services.reaper.tick();
    expect(await call()).toMatchObject({ status: 'connected', orphaned: false });
    expect((await widgetState(api, agent.widgetToken)).body).toMatchObject({ engine: { state: 'ready' } });
    await h.clock.advanceSeconds(LIMITS.heartbeatMs / 1000);
    expect((await heartbeat(api, agent.engineToken, { call_id: id })).status).toBe(200);
    await h.clock.advanceSeconds(LIMITS.storeRecoveryGraceSeconds - LIMITS.heartbeatMs / 1000);
    await h.services.reaper.tick();
    expect(await call()).toMatchObject({ status: 'connected', orphaned: false });

    // Past the grace, a window that falls silent is judged as ever: orphaned at 30 s, ended at 90 s.
    await h.clock.advanceSeconds(LIMITS.engineStaleSeconds);
    await h.services.reaper.tick();
    expect(await call()).toMatchObject({ status: 'connected', orphaned: true });
    await h.clock.advanceSeconds(LIMITS.engineOfflineAfterSeconds - LIMITS.engineStaleSeconds);
    await h.services.reaper.tick();
    expect(await call()).toMatchObject({ status: 'completed' });
  });

  it('a node started just after an outage judges no silence either until every window could report (it cannot tell the store just came back)', async () => {
    const api = client(h.app);
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t);
    const id = (requested.body as { request_id: string }).request_id;
    expect((await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
    await heartbeat(api, agent.engineToken, { call_id: id });
    await h.clock.advanceSeconds(3);
    const call = async () => (await api.get(`/calls/${id}`, { auth: t.serverKey })).body as { status: string; orphaned: boolean };
    expect(await call()).toMatchObject({ status: 'connected', orphaned: false });
    // the window was silenced for two minutes by an outage this new node did not see
    await h.clock.advanceSeconds(120);
    const started = createReaper({ db: h.services.db, bus: h.services.bus, clock: h.clock, providers: h.services.providers });
    await started.tick();
    expect(await call()).toMatchObject({ status: 'connected', orphaned: false });
    await h.clock.advanceSeconds(LIMITS.storeRecoveryGraceSeconds - 1);
    await started.tick();
    expect(await call()).toMatchObject({ status: 'connected', orphaned: false });
    // a window silent all this while is judged once the grace is over
    await h.clock.advanceSeconds(1);
    await started.tick();
    expect(await call()).toMatchObject({ status: 'completed' });
  });
});
