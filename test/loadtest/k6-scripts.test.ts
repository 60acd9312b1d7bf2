/**
 * The k6 scripts users run (loadtest/k6/), run here against the real service under a stand-in
 * for k6, which cannot be installed on these machines (test/helpers/k6/README.md says what the
 * stand-in proves and what it does not). Two agents, a call or a few commands each: the scripts'
 * flows must hold end to end, and the store must show exactly what they did.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { DEMO, type DemoCredentials } from '../../api/demo/seed.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import { startNode, type RunningNode } from '../../api/serve.js';
import { freePort } from '../helpers/processes.js';

const ROOT = join(import.meta.dirname, '..', '..');
const K6 = join(ROOT, 'test', 'helpers', 'k6');

interface Summary {
  checks: Record<string, { passes: number; fails: number }>;
  metrics: Record<string, number[]>;
  http: { requests: number; failed: number; statuses: Record<string, number> };
  errors: string[];
}

function k6(script: string, env: Record<string, string>): Promise<{ code: number | null; summary: Summary; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', join(K6, 'register.mjs'), join(K6, 'run.mjs'), join(ROOT, 'loadtest', 'k6', script)], {
      env: { PATH: process.env.PATH, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve({ code, summary: JSON.parse(line) as Summary, stderr });
      } catch {
        reject(new Error(`the k6 stand-in printed no summary (exit ${code}): ${stderr}`));
      }
    });
  });
}

const failedChecks = (summary: Summary) => Object.entries(summary.checks).filter(([, entry]) => entry.fails > 0);

describe('the k6 load scripts, against the real service', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-k6-'));
  let node: RunningNode;
  let env: Record<string, string>;

  beforeAll(async () => {
    // Known ports: the session's realtime URL and demo.json name them (they cannot name port 0's pick).
    const [port, gatewayPort, demoPort] = [await freePort(), await freePort(), await freePort()];
    const config = loadConfig({ C2C_DATA_DIR: dataDir, PORT: String(port), GATEWAY_PORT: String(gatewayPort), DEMO_PORT: String(demoPort), LOG_LEVEL: 'silent' });
    node = await startNode(config, { demo: true, logger: false });
    const { db, bus, clock } = node.services;
    for (const n of [1, 2]) await createMember({ db, bus, clock }, { accountId: DEMO.accountId, email: `load-${n}@demo.example`, name: `Load ${n}`, departmentId: DEMO.sales });
    const demo = JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8')) as DemoCredentials;
    env = { BASE_URL: demo.base_url, SERVER_KEY: demo.server_key, INTEGRATION_ID: demo.integration_id, ORIGIN: demo.allowed_origin, AGENTS: '2' };
  });
  afterAll(async () => {
    await node?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('calls.js: each agent gets a call idempotently, its window claims it, the widget mutes, unmutes and dials a digit, and it ends completed', { timeout: 90_000 }, async () => {
    const { code, summary, stderr } = await k6('calls.js', { ...env, CALLS: '1', CALL_SECONDS: '9', WRAP_UP_MS: '1' });
    expect(summary.errors, stderr).toEqual([]);
    expect(failedChecks(summary), stderr).toEqual([]);
    expect(code).toBe(0);
    expect(summary.checks['a retried POST /calls answers 200 with the same call']?.passes).toBe(2);
    expect(summary.checks['the call ends completed']?.passes).toBe(2);
    expect(summary.metrics.c2c_calls_completed).toEqual([1, 1]);
    expect(summary.metrics.c2c_calls_failed).toBeUndefined();
    expect(summary.metrics.c2c_call_setup_ms).toHaveLength(2);
    expect(summary.metrics.c2c_command_pickup_ms).toHaveLength(6);
    expect(summary.http.failed).toBe(0);

    const calls = await node.services.db.query<{ status: string; idempotency_key: string; duration: number }>(
      "SELECT c.status, c.idempotency_key FROM call_intents c JOIN members m ON m.id = c.member_id WHERE m.email LIKE 'load-%' ORDER BY c.created_at",
    );
    expect(calls.map((call) => call.status)).toEqual(['completed', 'completed']);
    expect(new Set(calls.map((call) => call.idempotency_key)).size).toBe(2);
    const commands = await node.services.db.query<{ kind: string; status: string; acks: number }>(
      "SELECT w.kind, w.status, w.acks FROM widget_commands w JOIN members m ON m.id = w.member_id WHERE m.email LIKE 'load-%' ORDER BY w.kind",
    );
    expect(commands.map((command) => `${command.kind} ${command.status} ${command.acks}`)).toEqual(['dtmf done 1', 'dtmf done 1', 'mute done 1', 'mute done 1', 'unmute done 1', 'unmute done 1']);
  });

  it('push.js: over the gateway, each widget gets its snapshot, and every command it sends reaches the window by push and is acked once', { timeout: 60_000 }, async () => {
    const { code, summary, stderr } = await k6('push.js', { ...env, COMMANDS: '3', EVERY_MS: '20' });
    expect(summary.errors, stderr).toEqual([]);
    expect(failedChecks(summary), stderr).toEqual([]);
    expect(code).toBe(0);
    expect(summary.checks['the widget gets its snapshot on connect, with the window ready']?.passes).toBe(2);
    expect(summary.metrics.c2c_snapshot_ms).toHaveLength(2);
    expect(summary.metrics.c2c_command_delivery_ms).toHaveLength(6);
    expect(summary.metrics.c2c_socket_refusals).toBeUndefined();

    const focus = await node.services.db.query<{ status: string; acks: number }>(
      "SELECT w.status, w.acks FROM widget_commands w JOIN members m ON m.id = w.member_id WHERE m.email LIKE 'load-%' AND w.kind = 'focus'",
    );
    expect(focus.map((command) => `${command.status} ${command.acks}`)).toEqual(Array(6).fill('done 1'));
  });

  it('a run against a service that refuses it fails loudly: a wrong server key is a failed check and an iteration error per agent', { timeout: 30_000 }, async () => {
    const wrong = `${env.SERVER_KEY!.slice(0, -1)}${env.SERVER_KEY!.endsWith('A') ? 'B' : 'A'}`;
    const { code, summary } = await k6('push.js', { ...env, SERVER_KEY: wrong });
    expect(code).toBe(1);
    expect(summary.checks['POST /sessions: 201']).toEqual({ passes: 0, fails: 2 });
    expect(summary.errors).toHaveLength(2);
    expect(summary.errors[0]).toContain('no widget session');
  });
});
