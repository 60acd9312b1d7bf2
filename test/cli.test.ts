/**
 * The c2c CLI: operator steps of spec section 1, JSON output, refusal of lines that are not
 * origins (nothing saved), and the real binary both against the store and through a running server.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_PATH, registerAdminBridge, runCommand } from '../api/cli/admin-bridge.js';
import { buildApp } from '../api/app.js';
import { loadConfig } from '../api/config.js';
import { startNode, type RunningNode } from '../api/serve.js';
import { createHarness, type Harness } from './helpers/harness.js';

const run = promisify(execFile);
const BIN = join(import.meta.dirname, '..', 'bin', 'c2c.js');

describe('c2c operator commands', () => {
  let h: Harness;
  const c2c = async (...argv: string[]) => {
    const result = await runCommand(['--json', ...argv], async () => h.services);
    return { ...result, json: result.stdout.length ? JSON.parse(result.stdout.join('\n')) : undefined };
  };

  beforeAll(async () => {
    h = await createHarness('pglite');
  });
  afterAll(() => h.close());

  it('sets up an account, a member and an integration, and shows the server key once', async () => {
    const account = await c2c('account', 'create', '--name', 'Beta', '--balance', '25.50');
    expect(account.code).toBe(0);
    expect(account.json.balance_micros).toBe(25_500_000);
    const member = await c2c('member', 'create', '--account', account.json.id, '--email', 'bo@beta.example', '--name', 'Bo');
    expect(member.json.uuid).toMatch(/^[0-9a-f-]{36}$/);
    const integration = await c2c('integration', 'create', '--account', account.json.id, '--name', 'Beta CRM', '--origin', 'https://beta.example', '--numbers', 'hide', '--countries', 'us,gb', '--caller-id', '+12025550100');
    expect(integration.code).toBe(0);
    expect(integration.json.server_key).toMatch(/^c2ck_/);
    const [row] = await h.services.db.query<any>('SELECT * FROM integrations WHERE id = $1', [integration.json.integration_id]);
    expect(row).toMatchObject({ allowed_origins: ['https://beta.example'], number_visibility: 'hide', destination_countries: ['US', 'GB'] });

    const rotated = await c2c('integration', 'rotate-key', integration.json.integration_id);
    expect(rotated.json.server_key).not.toBe(integration.json.server_key);
  });

  it('refuses lines that are not origins, names them, and saves nothing', async () => {
    const account = await c2c('account', 'create', '--name', 'Gamma');
    const created = await c2c('integration', 'create', '--account', account.json.id, '--name', 'G', '--origin', 'https://ok.example');
    const id = created.json.integration_id;
    const refused = await c2c('integration', 'origins', id, '--origin', 'https://fine.example', '--origin', 'https://bad.example/path', '--origin', 'not an origin', '--origin', 'https://evil.example\\.ok.example');
    expect(refused.code).toBe(1);
    expect(refused.stderr.join('\n')).toContain('https://bad.example/path');
    // a backslash is a path to the URL parser: that line is https://evil.example, not a host under ok.example
    expect(refused.stderr.join('\n')).toContain('https://evil.example');
    expect(refused.stderr.join('\n')).toContain('not an origin');
    const [row] = await h.services.db.query<any>('SELECT allowed_origins FROM integrations WHERE id = $1', [id]);
    expect(row.allowed_origins).toEqual(['https://ok.example']);
    const accepted = await c2c('integration', 'origins', id, '--origin', 'https://fine.example', '--origin', 'HTTPS://Other.Example:8443');
    expect(accepted.json.allowed_origins).toEqual(['https://fine.example', 'https://other.example:8443']);
  });

  it('switches the platform off and on', async () => {
    expect((await c2c('platform', 'disable')).json).toEqual({ disabled: true });
    expect(await h.services.platform.isDisabled()).toBe(true);
    expect((await c2c('platform', 'enable')).json).toEqual({ disabled: false });
  });

  it('reports bad arguments without running anything', async () => {
    const result = await c2c('integration', 'policy', 'c2c_x', '--numbers', 'sometimes');
    expect(result.code).not.toBe(0);
    expect(result.stderr.join('\n')).toContain('show, hide, masked');
  });

  it('takes no money away: a negative or empty top-up or opening balance is refused, saying why, and changes nothing', async () => {
    const account = await c2c('account', 'create', '--name', 'Delta', '--balance', '100');
    const balance = async () => Number((await h.services.db.query<{ balance_micros: number }>('SELECT balance_micros FROM accounts WHERE id = $1', [account.json.id]))[0]!.balance_micros);
    for (const amount of ['-5', '0', 'abc', '']) {
      const refused = await c2c('account', 'fund', account.json.id, amount);
      expect(refused.code, amount).toBe(1);
      expect(refused.stderr.join('\n'), amount).toMatch(/expected an amount/);
    }
    const dashed = await c2c('account', 'fund', account.json.id, '--', '-5');
    expect(dashed.code).toBe(1);
    expect(await balance()).toBe(100_000_000);
    const negative = await c2c('account', 'create', '--name', 'Overdrawn', '--balance', '-5');
    expect(negative.code).toBe(1);
    expect((await h.services.db.query('SELECT 1 FROM accounts WHERE name = $1', ['Overdrawn'])).length).toBe(0);
    const rate = await c2c('rate', 'set', '+44', 'abc');
    expect([rate.code, rate.stderr.join('\n')]).toEqual([1, expect.stringContaining('expected an amount')]);
    expect((await c2c('account', 'fund', account.json.id, '2.5')).json.balance_micros).toBe(102_500_000);
  });

  it("refuses integration-wide settings on a member's overrides rather than ignoring them", async () => {
    const refused = await c2c('integration', 'override', 'c2c_x', 'mem_x', '--countries', 'FR');
    expect(refused.code).toBe(1);
    expect(refused.stderr.join('\n')).toContain('--countries');
    expect((await c2c('integration', 'override', 'c2c_x', 'mem_x', '--concurrency', '2')).code).toBe(1);
  });
});

describe('the admin bridge', () => {
  it('serves loopback connections holding the token, and no one else, whatever X-Forwarded-For says', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bridge-'));
    // every hop trusted: request.ip would be whatever the header says
    const h = await createHarness('pglite', { dataDir, trustProxy: true });
    const app = await buildApp(h.services, { logger: false });
    try {
      const publish = registerAdminBridge(app, h.services);
      await app.ready();
      publish('http://127.0.0.1:1');
      const { token } = JSON.parse(readFileSync(join(dataDir, 'admin.json'), 'utf8')) as { token: string };
      const call = (remoteAddress: string, forwardedFor?: string) =>
        app.inject({
          method: 'POST',
          url: ADMIN_PATH,
          remoteAddress,
          headers: { authorization: `Bearer ${token}`, ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}) },
          payload: { argv: ['--json', 'platform', 'status'] },
        });
      expect((await call('127.0.0.1')).json()).toMatchObject({ code: 0 });
      const remote = await call('203.0.113.9', '127.0.0.1');
      expect(remote.statusCode).toBe(401);
      expect(remote.json()).toMatchObject({ ok: false, error: 'unauthorized' });
    } finally {
      await app.close();
      await h.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('the c2c binary', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-cli-'));
  const env = { ...process.env, C2C_DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: 'silent' };
  let node: RunningNode | undefined;
  afterAll(async () => {
    await node?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('works against the embedded store when no server runs, then through the running server', async () => {
    const offline = await run(process.execPath, [BIN, '--json', 'account', 'create', '--name', 'Offline Co'], { env });
    expect(JSON.parse(offline.stdout).name).toBe('Offline Co');

    node = await startNode(loadConfig({ ...env, PORT: '0' }), { logger: false });
    const online = await run(process.execPath, [BIN, '--json', 'platform', 'disable'], { env });
    expect(JSON.parse(online.stdout)).toEqual({ disabled: true });
    // The running server saw it at once: its own cache was updated by the command it ran.
    expect(await node.services.platform.isDisabled()).toBe(true);
    const accounts = await node.services.db.query<{ name: string }>('SELECT name FROM accounts');
    expect(accounts.map((a) => a.name)).toContain('Offline Co');
    await run(process.execPath, [BIN, 'platform', 'enable'], { env });
  }, 90_000);

  it('reaches a server that listens on one address only (HOST=::1) through the bridge', async () => {
    const ownDir = mkdtempSync(join(tmpdir(), 'c2c-cli-v6-'));
    const ownEnv = { ...env, C2C_DATA_DIR: ownDir };
    const v6 = await startNode(loadConfig({ ...ownEnv, HOST: '::1', PORT: '0', GATEWAY_PORT: '0' }), { logger: false });
    try {
      expect(v6.url).toMatch(/^http:\/\/\[::1\]:\d+$/);
      const status = await run(process.execPath, [BIN, '--json', 'platform', 'disable'], { env: ownEnv });
      expect(JSON.parse(status.stdout)).toEqual({ disabled: true });
      expect(await v6.services.platform.isDisabled()).toBe(true);
    } finally {
      await v6.close();
      rmSync(ownDir, { recursive: true, force: true });
    }
  }, 90_000);

  it('exits non-zero with a clear message on a bad configuration', async () => {
    const failed = await run(process.execPath, [BIN, 'platform', 'status'], { env: { ...env, PORT: 'eighty' } }).catch((e) => e);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('PORT');
  });
});
