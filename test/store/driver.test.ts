/**
 * The store driver suite: the same assertions on PGlite and on PostgreSQL (DESIGN, convention 3).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../api/config.js';
import { isUniqueViolation, type Db } from '../../api/store/index.js';
import { batchRows } from '../../api/store/batch-rows.js';
import { migrate } from '../../api/store/migrate.js';
import { openPglite } from '../../api/store/pglite.js';
import { startOf, thisProcess } from '../../api/store/data-dir-lock.js';
import { postgresUrl, storeDrivers } from '../helpers/env.js';
import { openTestDatabase, type TestDatabase } from '../helpers/databases.js';

describe.each(storeDrivers())('store driver %s', (driver) => {
  let database: TestDatabase;
  let db: Db;

  beforeAll(async () => {
    database = await openTestDatabase(driver, { migrate: false });
    db = database.db;
  });
  afterAll(() => database.drop());

  it('applies every migration once, and again is a no-op', async () => {
    const first = await migrate(db);
    expect(first).toEqual(['001_foundation.sql', '002_calls.sql', '003_call_provider.sql', '004_engine_calls.sql', '005_agent_latest.sql', '006_session_family.sql', '007_launch_ticket_session.sql', '008_failed_command.sql', '009_session_server_key.sql', '010_abandoned_retry.sql', '011_widget_language_page.sql', '012_widget_language_page_value.sql', '013_command_call_unreferenced.sql', '014_launch_ticket_pair_attempt.sql', '015_call_hangup_reason.sql', '016_account_twilio_keys.sql', '017_incoming_numbers.sql', '018_withheld_callers.sql', '019_incoming_ring_attempts.sql', '020_call_provider_checks.sql', '021_premium_rate.sql', '022_push_debt.sql', '023_call_value_checks.sql']);
    expect(await migrate(db)).toEqual([]);
    const tables = await db.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
    expect(tables.map((t) => t.table_name)).toEqual(expect.arrayContaining(['accounts', 'integrations', 'widget_sessions', 'call_intents', 'engines']));
  });

  it('returns int8 as numbers, jsonb as objects, arrays as arrays and bytea as bytes', async () => {
    const [row] = await db.query<{ big: number; j: { a: number[] }; arr: string[]; b: Uint8Array }>(
      "SELECT 9007199254740991::bigint AS big, '{\"a\":[1,2]}'::jsonb AS j, ARRAY['x','y'] AS arr, '\\x0102'::bytea AS b",
    );
    expect(row).toMatchObject({ big: 9007199254740991, j: { a: [1, 2] }, arr: ['x', 'y'] });
    expect([...row!.b]).toEqual([1, 2]);
  });

  it('reads the input rows of a batch the same way for one item (VALUES) and for many (unnest)', async () => {
    const read = async (names: Array<string | null>) => {
      const rows = batchRows('i', [
        ['name', 'text', names],
        ['size', 'integer', names.map((name) => name?.length ?? 0)],
      ]);
      return db.query<{ name: string | null; size: number; n: number }>(`SELECT name, size, n FROM ${rows.from} ORDER BY n`, rows.params);
    };
    expect(await read(['solo'])).toEqual([{ name: 'solo', size: 4, n: 1 }]);
    expect(await read(['a', null, 'ccc'])).toEqual([
      { name: 'a', size: 1, n: 1 },
      { name: null, size: 0, n: 2 },
      { name: 'ccc', size: 3, n: 3 },
    ]);
  });

  it('rolls a failed transaction back entirely', async () => {
    await db.query('CREATE TABLE t_rollback (id int PRIMARY KEY)');
    await expect(
      db.tx(async (sql) => {
        await sql.query('INSERT INTO t_rollback VALUES (1)');
        await sql.query('INSERT INTO t_rollback VALUES (1)');
      }),
    ).rejects.toSatisfy((error: unknown) => isUniqueViolation(error));
    expect(await db.query('SELECT * FROM t_rollback')).toEqual([]);
  });

  it('never reports a commit of a transaction a failed statement aborted, even when the error was caught inside it', async () => {
    await db.query('CREATE TABLE t_aborted (id int PRIMARY KEY)');
    await expect(
      db.tx(async (sql) => {
        await sql.query('INSERT INTO t_aborted VALUES (1)');
        await sql.query('INSERT INTO t_aborted VALUES (1)').catch(() => undefined);
        return 'done';
      }),
    ).rejects.toThrow();
    expect(await db.query('SELECT * FROM t_aborted')).toEqual([]);
  });

  it('serializes transactions that take the same advisory lock', async () => {
    await db.query('CREATE TABLE t_counter (n int NOT NULL)');
    await db.query('INSERT INTO t_counter VALUES (0)');
    await Promise.all(
      Array.from({ length: 20 }, () =>
        db.tx(async (sql) => {
          await sql.query("SELECT pg_advisory_xact_lock(hashtext('counter'))");
          const [row] = await sql.query<{ n: number }>('SELECT n FROM t_counter');
          await sql.query('UPDATE t_counter SET n = $1', [row!.n + 1]);
        }),
      ),
    );
    expect(await db.query('SELECT n FROM t_counter')).toEqual([{ n: 20 }]);
  });

  it('lets exactly one of many concurrent conditional updates win', async () => {
    await db.query("CREATE TABLE t_claim (id int PRIMARY KEY, status text NOT NULL)");
    await db.query("INSERT INTO t_claim VALUES (1, 'queued')");
    const results = await Promise.all(
      Array.from({ length: 25 }, (_, i) =>
        db.query("UPDATE t_claim SET status = $1 WHERE id = 1 AND status = 'queued' RETURNING id", [`claimed-${i}`]),
      ),
    );
    expect(results.filter((rows) => rows.length === 1)).toHaveLength(1);
  });
});

describe.skipIf(!storeDrivers().includes('pg'))('PostgreSQL connections lost', () => {
  it('fails a transaction whose connection is killed, without stopping the process, and goes on', async () => {
    const database = await openTestDatabase('pg', { migrate: false });
    const crashes: unknown[] = [];
    const note = (error: unknown) => crashes.push(error);
    process.on('uncaughtException', note);
    try {
      const killed = database.db.tx(async (sql) => {
        const [{ pid }] = (await sql.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')) as [{ pid: number }];
        await database.db.query('SELECT pg_terminate_backend($1)', [pid]);
        // the connection drops while no statement of the transaction runs: the client itself emits the error
        await new Promise((resolve) => setTimeout(resolve, 200));
        await sql.query('SELECT 1');
      });
      await expect(killed).rejects.toThrow();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(crashes).toEqual([]);
      expect(await database.db.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    } finally {
      process.off('uncaughtException', note);
      await database.drop();
    }
  });
});

describe.skipIf(!postgresUrl())('PostgreSQL connections', () => {
  it('plan a batch statement once per connection, whatever the size of each batch', async () => {
    const database = await openTestDatabase('pg');
    try {
      // one connection's prepared statement, run with batches of 1 to 8 rows (unnest of arrays)
      await database.db.tx(async (sql) => {
        const text = 'SELECT count(*)::int AS n FROM unnest($1::text[]) AS i(id) LEFT JOIN engines e ON e.id = i.id';
        for (let size = 1; size <= 8; size += 1) await sql.query(text, [Array.from({ length: size }, (_, k) => `eng_${k}`)]);
        const [plans] = await sql.query<{ generic_plans: number; custom_plans: number }>(
          "SELECT generic_plans::int, custom_plans::int FROM pg_prepared_statements WHERE statement LIKE '%unnest($1::text[]) AS i(id)%'",
        );
        expect(plans).toEqual({ generic_plans: 8, custom_plans: 0 });
      });
    } finally {
      await database.drop();
    }
  });
});

describe('PGlite persistence', () => {
  const dir = mkdtempSync(join(tmpdir(), 'c2c-pglite-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps data across a restart of the embedded store', async () => {
    const first = await openPglite(dir);
    await migrate(first);
    await first.query("INSERT INTO rates (prefix, per_minute_micros) VALUES ('+44', 123)");
    await first.close();
    const second = await openPglite(dir);
    expect(await migrate(second)).toEqual([]);
    expect(await second.query('SELECT prefix, per_minute_micros FROM rates')).toEqual([{ prefix: '+44', per_minute_micros: 123 }]);
    await second.close();
  });

  describe('is opened by one process at a time', () => {
    const locked = () => join(dir, 'locked');
    const lockFile = () => `${locked()}.lock`;
    /** a process that has exited: its pid names nobody (for now) */
    const deadPid = () => new Promise<number>((resolve) => {
      const child = spawn(process.execPath, ['-e', '']);
      child.on('exit', () => resolve(child.pid!));
    });

    it('refuses a directory open already, naming the process that holds it, and opens it once that has closed', async () => {
      const first = await openPglite(locked());
      await expect(openPglite(locked())).rejects.toThrow(new RegExp(`embedded store in ${locked()} is open in process ${process.pid} \\(this one\\)`));
      await expect(openPglite(locked())).rejects.toBeInstanceOf(ConfigError);
      await first.close();
      expect(existsSync(lockFile())).toBe(false);
      const again = await openPglite(locked());
      await again.close();
    });

    it("refuses a directory another live process holds, or a process on another host, and takes over the lock of one that is gone, rebooted away, or whose pid another process now has", async () => {
      const holder = (over: Record<string, unknown>) => writeFileSync(lockFile(), JSON.stringify({ ...thisProcess(), ...over }));
      // the vitest process that runs this worker is alive, and started at the time its lock says
      holder({ pid: process.ppid, start: startOf(process.ppid) });
      await expect(openPglite(locked())).rejects.toThrow(`open in process ${process.ppid}:`);
      holder({ host: 'other-host.example', pid: 1 });
      await expect(openPglite(locked())).rejects.toThrow('open in process 1 on host other-host.example');
      for (const gone of [{ pid: process.ppid, start: '1' }, { pid: await deadPid(), start: null }, { pid: process.ppid, boot: 'a-boot-before-a-reboot' }]) {
        holder(gone);
        const opened = await openPglite(locked());
        expect(JSON.parse(readFileSync(lockFile(), 'utf8'))).toMatchObject({ pid: process.pid });
        await opened.close();
      }
      // a file that names nobody (written by hand, or cut short), left for a while
      writeFileSync(lockFile(), '{"pid":');
      const past = new Date(Date.now() - 60_000);
      utimesSync(lockFile(), past, past);
      const opened = await openPglite(locked());
      await opened.close();
      expect(existsSync(lockFile())).toBe(false);
    });

    // Mutual exclusion among processes started together on a lock left behind. (The narrow race the
    // takeover file closes, one taker removing the lock another has just made, is not hit reliably
    // from here: it is argued in data-dir-lock.ts.)
    it('lets one of several processes taking over a lock left behind hold it, never two', async () => {
      const target = join(dir, 'contended');
      writeFileSync(`${target}.lock`, JSON.stringify({ ...thisProcess(), pid: await deadPid(), start: null }));
      const lockModule = join(import.meta.dirname, '..', '..', 'api', 'store', 'data-dir-lock.ts');
      const script = `const { lockDataDir } = await import(${JSON.stringify(lockModule)});
        try { await lockDataDir(${JSON.stringify(target)}); console.log('held'); } catch { console.log('refused'); }
        setInterval(() => {}, 1000);`;
      const children = Array.from({ length: 4 }, () => spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script]));
      try {
        const said = await Promise.all(
          children.map((child) => new Promise<string>((resolve) => child.stdout.on('data', (data: Buffer) => resolve(data.toString().trim())))),
        );
        expect(said.filter((word) => word === 'held')).toHaveLength(1);
        expect(said.filter((word) => word === 'refused')).toHaveLength(3);
      } finally {
        for (const child of children) child.kill();
      }
    }, 60_000);
  });
});
