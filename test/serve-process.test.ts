/**
 * `c2c serve` as an operator meets it (api/cli/main.ts, api/cli/signals.ts, api/serve.ts): a node
 * that cannot start says what to fix in one line naming the variable, and a node told to stop
 * while it is still starting stops cleanly instead of being killed half-opened.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPgDatabase } from './helpers/databases.js';
import { postgresUrl, redisUrl } from './helpers/env.js';
import { freePort, spawnNode, spawnRedis, waitFor, type NodeProcess } from './helpers/processes.js';

const dataDirs: string[] = [];
afterAll(() => dataDirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A node of role all on the embedded store (whatever the suite's own environment names), on a data directory of its own. */
function serve(name: string, env: Record<string, string>): { node: NodeProcess; dataDir: string } {
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-serve-'));
  dataDirs.push(dataDir);
  const node = spawnNode(name, [], { DATABASE_URL: '', REDIS_URL: '', C2C_DATA_DIR: dataDir, PORT: '0', GATEWAY_PORT: '0', DEMO_PORT: '0', ...env });
  return { node, dataDir };
}

const listening = (port: number) =>
  new Promise<Server>((resolve) => {
    const server = createServer();
    server.listen(port, '127.0.0.1', () => resolve(server));
  });

describe('c2c serve that cannot start', () => {
  it('says what to fix in one line naming the variable: no stack, no password', async () => {
    const [nothingThere, taken, same] = await Promise.all([freePort(), freePort(), freePort()]);
    const occupant = await listening(taken);
    try {
      const cases: Array<{ env: Record<string, string>; says: RegExp }> = [
        {
          env: { REDIS_URL: `redis://:hunter2@127.0.0.1:${nothingThere}` },
          says: /^c2c: Redis at REDIS_URL \(redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/?\) cannot be reached: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
        },
        {
          env: { REDIS_URL: `redis://127.0.0.1:${nothingThere}/?password=hunter2` },
          says: /^c2c: Redis at REDIS_URL \(redis:\/\/127\.0\.0\.1:\d+\/\?password=\*\*\*\) cannot be reached: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
        },
        { env: { PORT: String(same), GATEWAY_PORT: String(same) }, says: /^c2c: PORT and GATEWAY_PORT are both \d+: the API and the gateway each need a port of their own\.$/ },
        { env: { GATEWAY_PORT: String(taken) }, says: /^c2c: the gateway cannot listen on 127\.0\.0\.1:\d+ \(HOST, GATEWAY_PORT\): the port is taken/ },
        { env: { PORT: String(taken) }, says: /^c2c: the API cannot listen on 127\.0\.0\.1:\d+ \(HOST, PORT\): listen EADDRINUSE/ },
      ];
      const outcomes = await Promise.all(
        cases.map(async ({ env }, index) => {
          const { node } = serve(`failing-${index}`, env);
          return { code: await node.exited, output: node.output.join('').trim() };
        }),
      );
      outcomes.forEach(({ code, output }, index) => {
        expect(code, output).toBe(1);
        // what c2c says of the failure; the app's info and warning log lines before it (that the
        // browser bundles are not built, on a fresh clone before any suite built them) are the log's
        const said = output.split('\n').filter((line) => !/^\{"level":(30|40),/.test(line));
        expect(said, output).toHaveLength(1);
        expect(said[0]).toMatch(cases[index]!.says);
        expect(output).not.toContain('hunter2');
        expect(output).not.toContain('"stack"');
      });
    } finally {
      occupant.close();
    }
  }, 60_000);
});

describe.skipIf(!postgresUrl())('c2c serve on PostgreSQL with a data directory it cannot write', () => {
  it('names C2C_DATA_DIR in one line (where admin.json goes), not the loopback listener', async () => {
    const database = await createPgDatabase();
    try {
      const parent = mkdtempSync(join(tmpdir(), 'c2c-serve-'));
      dataDirs.push(parent);
      const file = join(parent, 'a-file');
      writeFileSync(file, '');
      const { node } = serve('unwritable', { DATABASE_URL: database.url, C2C_DATA_DIR: join(file, 'data') });
      const code = await node.exited;
      const output = node.output.join('').trim();
      expect(code, output).toBe(1);
      const said = output.split('\n').filter((line) => !/^\{"level":(30|40),/.test(line));
      expect(said, output).toHaveLength(1);
      expect(said[0]).toMatch(/^c2c: C2C_DATA_DIR \(.*a-file\/data\) cannot hold admin\.json: ENOTDIR/);
    } finally {
      await database.drop();
    }
  }, 60_000);
});

describe.skipIf(!redisUrl())('c2c serve on a Redis without sharded pub/sub', () => {
  it('refuses to start, in one line naming REDIS_URL and the version needed, rather than lose every push between nodes unheard', async () => {
    const port = await freePort();
    // as Redis 6 answers: the adapter's SPUBLISH and SSUBSCRIBE unknown
    const redis = spawnRedis(port, ['--rename-command', 'SPUBLISH', '', '--rename-command', 'SSUBSCRIBE', '']);
    await redis.start();
    try {
      const { node } = serve('old-redis', { REDIS_URL: `redis://127.0.0.1:${port}` });
      const code = await node.exited;
      const output = node.output.join('').trim();
      expect(code, output).toBe(1);
      expect(output.split('\n'), output).toHaveLength(1);
      expect(output).toMatch(/^c2c: Redis at REDIS_URL \(redis:\/\/127\.0\.0\.1:\d+\/?\): it has no sharded pub\/sub .*Redis 7 or later/);
    } finally {
      await redis.stop();
    }
  }, 60_000);
});

describe.skipIf(!postgresUrl())('c2c serve told to stop while it starts', () => {
  /** A node whose start waits, migrating, on the migration lock another connection holds until release(). */
  async function heldAtStart(run: (held: { node: NodeProcess; dataDir: string; release(): Promise<void> }) => Promise<void>): Promise<void> {
    const database = await createPgDatabase();
    const holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
    let held = true;
    const release = async () => {
      if (held) await holder.query('ROLLBACK');
      held = false;
    };
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock(726317001)'); // api/store/migrate.ts MIGRATION_LOCK
      const { node, dataDir } = serve('starting', { DATABASE_URL: database.url, LOG_LEVEL: 'info' });
      try {
        await waitFor(async () => {
          const [row] = (await holder.query(`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`)).rows;
          return row.n > 0 || undefined;
        }, 'the node to wait on the migration lock');
        await run({ node, dataDir, release });
      } finally {
        await node.stop('SIGKILL');
      }
    } finally {
      await release();
      await holder.end();
      await database.drop();
    }
  }

  const said = (node: NodeProcess, text: string) => waitFor(async () => node.output.join('').includes(text) || undefined, `"${text}"`, 10_000);

  it('finishes starting, then shuts down as it would have running: exit 0, admin.json gone', () =>
    heldAtStart(async ({ node, dataDir, release }) => {
      node.child.kill('SIGTERM');
      await said(node, 'SIGTERM: shutting down');
      await release();
      expect(await node.exited).toBe(0);
      expect(node.output.join('')).toContain('API on http://127.0.0.1:');
      expect(existsSync(join(dataDir, 'admin.json'))).toBe(false);
    }), 60_000);

  it('exits at once on a second signal, saying so', () =>
    heldAtStart(async ({ node }) => {
      node.child.kill('SIGTERM');
      await said(node, 'SIGTERM: shutting down');
      node.child.kill('SIGINT');
      expect(await node.exited).toBe(1);
      expect(node.output.join('')).toContain('SIGINT again: exiting without finishing the shutdown');
    }), 60_000);
});
