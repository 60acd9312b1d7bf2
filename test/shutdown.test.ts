/**
 * A node told to stop (SIGTERM: api/cli/main.ts → node.close(), api/serve.ts) lets the requests in
 * flight finish and answers them, instead of cutting their connections; it takes no new ones, and
 * closes its store only after. A request is held in flight by a lock on the table it writes.
 */
import { connect } from 'node:net';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../api/config.js';
import { startNode, type RunningNode } from '../api/serve.js';
import { createPgDatabase } from './helpers/databases.js';
import { postgresUrl } from './helpers/env.js';
import { waitFor } from './helpers/processes.js';
import { ORIGIN, seedTenant, type Tenant } from './helpers/tenant.js';

interface Stopping {
  node: RunningNode;
  t: Tenant;
  /** POST /sessions's body for the tenant's agent */
  sessionBody: string;
  /** locks widget_sessions from another connection: a new session waits until release() */
  lockSessions(): Promise<void>;
  /** resolves once a request waits on that lock */
  aRequestWaits(): Promise<void>;
  release(): Promise<void>;
  /** stops the node and resolves once its API no longer listens, with the promise of the whole close */
  stop(): Promise<{ closed: Promise<void> }>;
  sessionCount(): Promise<number>;
}

/** A node on a database of its own, with what these tests need to hold a request in flight. */
async function withNode(run: (s: Stopping) => Promise<void>, env: Record<string, string> = {}): Promise<void> {
  const database = await createPgDatabase();
  const node = await startNode(loadConfig({ DATABASE_URL: database.url, PORT: '0', GATEWAY_PORT: '0', DEMO_PORT: '0', LOG_LEVEL: 'silent', ...env }), { logger: false });
  const other = new pg.Client({ connectionString: database.url });
  await other.connect();
  try {
    const t = await seedTenant(node.services);
    await run({
      node,
      t,
      sessionBody: JSON.stringify({ integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }),
      lockSessions: async () => void (await other.query('BEGIN; LOCK TABLE widget_sessions IN ACCESS EXCLUSIVE MODE')),
      aRequestWaits: async () =>
        void (await waitFor(async () => {
          const [row] = (await other.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows;
          return row.n > 0 || undefined;
        }, 'the request waiting on the lock', 5000)),
      release: async () => void (await other.query('ROLLBACK')),
      stop: async () => {
        const closed = node.close();
        await waitFor(async () => (node.app!.server.listening ? undefined : true), 'the API to stop listening', 5000);
        return { closed };
      },
      sessionCount: async () => (await other.query('SELECT count(*)::int AS n FROM widget_sessions')).rows[0].n,
    });
  } finally {
    await other.end();
    await node.close();
    await database.drop();
  }
}

describe.skipIf(!postgresUrl())('a node told to stop', () => {
  it('answers the requests in flight, takes no new ones, and then closes', () =>
    withNode(async ({ node, t, sessionBody, lockSessions, aRequestWaits, release, stop, sessionCount }) => {
      const newSession = () =>
        fetch(`${node.url}/api/v1/click2call/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.serverKey}`, 'content-type': 'application/json' },
          body: sessionBody,
        });
      await lockSessions();
      const inFlight = newSession();
      await aRequestWaits();

      const { closed } = await stop();
      await expect(newSession()).rejects.toThrow(); // no new connection is taken
      await release();
      const answered = await inFlight;
      expect(answered.status).toBe(201);
      expect((await answered.json()).widget_token).toMatch(/^c2cw_/);
      await closed;
      expect(await sessionCount()).toBe(1);
    }));

  it('stops within its bound on a store that does not answer: the reaper\'s tick and a request stuck on it are not waited for', () =>
    withNode(
      async ({ node, t, sessionBody, lockSessions, aRequestWaits, release, stop }) => {
        await lockSessions();
        const inFlight = fetch(`${node.url}/api/v1/click2call/sessions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${t.serverKey}`, 'content-type': 'application/json' },
          body: sessionBody,
        }).catch(() => undefined);
        await aRequestWaits();
        // a reaper tick that never ends (its statement stuck on a store gone silent)
        const { reaper } = node.services;
        const stopTicking = reaper.stop.bind(reaper);
        reaper.stop = () => {
          void stopTicking();
          return new Promise<void>(() => {});
        };
        const { closed } = await stop();
        // closed while the lock is still held: neither was waited for to the statement timeout (60 s here)
        await closed;
        await release();
        await inFlight;
      },
      { DATABASE_STATEMENT_TIMEOUT_MS: '60000' },
    ), 30_000);

  it('tells a request that arrives on a kept-alive connection while it stops to retry elsewhere, in the envelope', () =>
    withNode(async ({ node, t, sessionBody, lockSessions, aRequestWaits, release, stop }) => {
      await lockSessions();
      // A request held by the lock keeps its connection open while the node stops; a second one
      // sent on it then arrives at a node that is stopping.
      const socket = connect(Number(new URL(node.url!).port), '127.0.0.1');
      let received = '';
      socket.on('data', (chunk) => (received += chunk.toString()));
      const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.write(`POST /api/v1/click2call/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.serverKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(sessionBody)}\r\n\r\n${sessionBody}`);
      await aRequestWaits();
      const { closed } = await stop();
      const arrived = new Promise((resolve) => node.app!.server.once('request', resolve));
      socket.write(`GET /api/v1/click2call/calls/ci_x HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.serverKey}\r\n\r\n`);
      await arrived; // its answer waits behind the first's (HTTP/1.1 answers in order)
      await release();
      await ended;
      await closed;
      const [first, second] = received.split(/(?=HTTP\/1\.1 )/);
      expect(first).toMatch(/^HTTP\/1\.1 201/);
      expect(second).toMatch(/^HTTP\/1\.1 503/);
      expect(second).toMatch(/retry-after: 1/i);
      expect(JSON.parse(second!.slice(second!.indexOf('\r\n\r\n') + 4))).toMatchObject({ ok: false, error: 'service_unavailable' });
    }));
});
