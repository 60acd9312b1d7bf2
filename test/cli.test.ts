/**
 * The c2c CLI: operator steps of spec section 1, JSON output, refusal of lines that are not
 * origins (nothing saved), and the real binary both against the store and through a running server.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_BODY_LIMIT, ADMIN_PATH, findRunningServer, runCommand, startAdminBridge, UNHEARD_CHANGE } from '../api/cli/admin-bridge.js';
import { startOf } from '../api/store/data-dir-lock.js';
import { createRedisBus } from '../api/bus/redis.js';
import { fileArguments, readAttachedFiles } from '../api/cli/files.js';
import { allowAllWarning, warnOfAllowAll } from '../api/domain/operator/integrations.js';
import { buildApp } from '../api/app.js';
import { ConfigError, loadConfig } from '../api/config.js';
import { C2CError } from '../shared/errors.js';
import { startNode, type RunningNode } from '../api/serve.js';
import { openPglite } from '../api/store/pglite.js';
import { migrate } from '../api/store/migrate.js';
import { client, createHarness, type Harness } from './helpers/harness.js';
import { postgresUrl, redisUrl } from './helpers/env.js';
import { openTestDatabase } from './helpers/databases.js';
import { readyAgent } from './helpers/flows.js';
import { createGatewayHarness } from './helpers/gateway.js';
import { openSocket, snapshotOf } from './helpers/sockets.js';
import { ORIGIN, seedTenant } from './helpers/tenant.js';
import { operate } from '../api/cli/operate.js';
import { busReaches, ownRedis } from './helpers/own-redis.js';

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
    // the opening balance is in the ledger as a top-up: the ledger's sum is the balance
    const ledger = await h.services.db.query<{ amount_micros: string; reason: string }>('SELECT amount_micros, reason FROM wallet_ledger WHERE account_id = $1', [account.json.id]);
    expect(ledger.map((entry) => [Number(entry.amount_micros), entry.reason])).toEqual([[25_500_000, 'top-up']]);
    const member = await c2c('member', 'create', '--account', account.json.id, '--email', 'bo@beta.example', '--name', 'Bo');
    expect(member.json.uuid).toMatch(/^[0-9a-f-]{36}$/);
    const integration = await c2c('integration', 'create', '--account', account.json.id, '--name', 'Beta CRM', '--origin', 'https://beta.example', '--numbers', 'hide', '--countries', 'us,gb', '--caller-id', '+12025550100');
    expect(integration.code).toBe(0);
    expect(integration.json.server_key).toMatch(/^c2ck_/);
    const [row] = await h.services.db.query<any>('SELECT * FROM integrations WHERE id = $1', [integration.json.integration_id]);
    expect(row).toMatchObject({ allowed_origins: ['https://beta.example'], number_visibility: 'hide', destination_countries: ['US', 'GB'] });

    const rotated = await c2c('integration', 'rotate-key', integration.json.integration_id);
    expect(rotated.json.server_key).not.toBe(integration.json.server_key);
    // a revoke says what it did: the second finds nothing left to revoke
    const revoked = await runCommand(['integration', 'revoke-key', integration.json.integration_id], async () => h.services);
    expect(revoked.stdout.join('\n')).toContain('server key revoked');
    const again = await runCommand(['integration', 'revoke-key', integration.json.integration_id], async () => h.services);
    expect([again.code, again.stdout.join('\n')]).toEqual([0, expect.stringContaining('no live server key to revoke')]);
  });

  it('refuses what would do nothing, or harm, saying why: unknown ids, bad values, an empty origin list, duplicate people', async () => {
    const account = (await c2c('account', 'create', '--name', 'Delta')).json.id as string;
    const refusal = async (argv: string[], text: string) => {
      const result = await c2c(...argv);
      expect(result.code, argv.join(' ')).toBe(1);
      expect(result.stderr.join('\n'), argv.join(' ')).toContain(text);
    };
    const integration = (await c2c('integration', 'create', '--account', account, '--name', 'Delta CRM', '--origin', 'https://delta.example')).json.integration_id as string;
    const member = (await c2c('member', 'create', '--account', account, '--email', 'dee@delta.example', '--name', 'Dee')).json;
    await refusal(['integration', 'revoke-key', 'c2c_nope'], 'No integration c2c_nope');
    await refusal(['integration', 'override', integration, member.id, '--max-call-seconds', '-10'], 'max_call_seconds');
    await refusal(['integration', 'override', integration, member.id, '--max-call-seconds', '0'], 'max_call_seconds');
    await refusal(['integration', 'override', integration, member.id, '--caller-id', 'garbage'], 'caller ID');
    await refusal(['integration', 'override', integration, member.id, '--caller-id', 'none'], 'inherit');
    await refusal(['integration', 'override', integration, member.id], 'Nothing to change');
    await refusal(['integration', 'policy', integration, '--max-call-seconds', '99999999999'], 'max_call_seconds');
    // above the platform's 4 h, where every call ends anyway: the widget would show a cap that is not
    await refusal(['integration', 'policy', integration, '--max-call-seconds', '28800'], "the platform's cap, 4 h");
    // a code no number has: UK would allow no call at all (a British number is GB)
    await refusal(['integration', 'policy', integration, '--countries', 'US,UK'], 'the United Kingdom is GB');
    await refusal(['integration', 'policy', integration, '--countries', 'XX'], 'Not an ISO 3166 country code');
    // an override lowers the cap, never raises it
    expect((await c2c('integration', 'policy', integration, '--max-call-seconds', '3600')).code).toBe(0);
    await refusal(['integration', 'override', integration, member.id, '--max-call-seconds', '7200'], "above the integration's 3600");
    await refusal(['integration', 'policy', integration, '--caller-id', '+1202555010'], 'caller ID');
    await refusal(['integration', 'origins', integration], '--none');
    // an empty list given (an empty file or standard input, comments only, an empty --origin) is a mistake, not --none
    for (const [argv, attached] of [
      [['--file', 'empty.txt'], { 'empty.txt': '' }],
      [['--file', '-'], { '-': '\n# nothing yet\n\n' }],
      [['--origin', ''], {}],
    ] as Array<[string[], Record<string, string>]>) {
      const emptied = await runCommand(['integration', 'origins', integration, ...argv], async () => h.services, attached);
      expect([emptied.code, emptied.stderr.join('\n')], argv.join(' ')).toEqual([1, expect.stringContaining('holds no origin')]);
    }
    expect((await c2c('integration', 'show', integration)).json.allowed_origins).toEqual(['https://delta.example']);
    await refusal(['integration', 'origins', integration, '--origin', 'https://*.delta.example'], 'no wildcard');
    await refusal(['integration', 'coverage', integration, '--mode', 'members'], '--members');
    await refusal(['member', 'create', '--account', account, '--email', 'DEE@delta.example', '--name', 'Dee again'], member.id);
    await refusal(['member', 'create', '--account', account, '--email', 'x@delta.example', '--name', '  '], 'needs a name');
    await refusal(['department', 'create', '--account', 'acc_nope', '--name', 'Sales'], 'No account acc_nope');
    expect((await c2c('department', 'create', '--account', account, '--name', 'Sales')).code).toBe(0);
    await refusal(['department', 'create', '--account', account, '--name', 'Sales'], 'has a department named');
    await refusal(['block', 'add', '+12025550199', '--account', 'acc_nope'], 'No account acc_nope');
    await refusal(['rate', 'set', '+1', '0.0000004'], '0.000001');
    const other = (await c2c('member', 'create', '--account', account, '--email', 'eve@delta.example', '--name', 'Eve')).json;
    expect((await c2c('integration', 'map-uuid', integration, member.id, '0b7f4f5e-0000-4000-8000-000000000001')).code).toBe(0);
    await refusal(['integration', 'map-uuid', integration, other.id, '0B7F4F5E-0000-4000-8000-000000000001'], `already member ${member.id}'s`);
    // another member's stable UUID finds that member in uuid mode: mapping it to this one would make both ambiguous
    await refusal(['integration', 'map-uuid', integration, other.id, member.uuid.toUpperCase()], `already member ${member.id}'s`);
    // nor can a new member take a UUID an integration maps to someone
    await refusal(['member', 'create', '--account', account, '--email', 'fay@delta.example', '--name', 'Fay', '--uuid', '0b7f4f5e-0000-4000-8000-000000000001'], `mapped to member ${member.id}`);
    // an override's caller ID goes back to the integration's with "inherit"
    expect((await c2c('integration', 'override', integration, member.id, '--caller-id', '+12025550100', '--max-call-seconds', '600')).code).toBe(0);
    expect((await c2c('integration', 'override', integration, member.id, '--caller-id', 'inherit')).code).toBe(0);
    expect((await c2c('integration', 'show', integration)).json.members).toEqual([
      { member_id: member.id, integrator_uuid: '0b7f4f5e-0000-4000-8000-000000000001', overrides: { max_call_seconds: 600 } },
    ]);
    // whether later members are covered stays as it was unless given
    expect((await c2c('integration', 'coverage', integration, '--mode', 'everyone', '--inherit-future', 'off')).code).toBe(0);
    expect((await c2c('integration', 'coverage', integration, '--mode', 'members', '--members', member.id)).code).toBe(0);
    expect((await c2c('integration', 'show', integration)).json.coverage).toEqual({ mode: 'members', inherit_future: false, department_ids: [], member_ids: [member.id] });
    // an empty origin list only when asked for
    expect((await c2c('integration', 'origins', integration, '--none')).json.allowed_origins).toEqual([]);
    // a removed member stays removed
    expect((await c2c('member', 'remove', other.id)).code).toBe(0);
    await refusal(['member', 'enable', other.id], 'was removed');
    // a revoked integration takes no more changes
    expect((await c2c('integration', 'revoke', integration)).code).toBe(0);
    await refusal(['integration', 'policy', integration, '--outbound', 'off'], 'was revoked');
    await refusal(['integration', 'origins', integration, '--origin', 'https://late.example'], 'was revoked');
  });

  it('lists an account\'s members with their stable UUIDs, shows an integration without its key, and takes a number off the do-not-call list', async () => {
    const account = (await c2c('account', 'create', '--name', 'Epsilon')).json.id as string;
    const department = (await c2c('department', 'create', '--account', account, '--name', 'Support')).json.id as string;
    const ann = (await c2c('member', 'create', '--account', account, '--email', 'ann@eps.example', '--name', 'Ann', '--department', department)).json;
    const created = (await c2c('integration', 'create', '--account', account, '--name', 'Eps CRM', '--origin', 'https://eps.example')).json;
    const listed = await c2c('member', 'list', '--account', account);
    expect(listed.json).toEqual([expect.objectContaining({ id: ann.id, email: 'ann@eps.example', uuid: ann.uuid, department_name: 'Support', enabled: true, removed: false })]);
    const shown = await c2c('integration', 'show', created.integration_id);
    expect(shown.json).toMatchObject({ integration_id: created.integration_id, name: 'Eps CRM', status: 'active', allowed_origins: ['https://eps.example'], live_server_keys: 1 });
    expect(JSON.stringify(shown)).not.toContain(created.server_key.slice(-12));
    const human = await runCommand(['member', 'list', '--account', account], async () => h.services);
    expect(human.stdout.join('\n')).toContain(`uuid ${ann.uuid}`);
    expect((await c2c('block', 'add', '+12025550177', '--account', account)).code).toBe(0);
    expect((await c2c('block', 'remove', '+12025550177', '--account', account)).json).toMatchObject({ removed: true });
    expect((await c2c('block', 'remove', '+12025550177', '--account', account)).code).toBe(1);
  });

  it("sets the widget's defaults, each kept unless given, and sessions carry them", async () => {
    const account = (await c2c('account', 'create', '--name', 'Zeta')).json.id as string;
    await c2c('member', 'create', '--account', account, '--email', 'zoe@zeta.example', '--name', 'Zoe');
    const created = (await c2c('integration', 'create', '--account', account, '--name', 'Zeta CRM', '--origin', 'https://zeta.example')).json;
    // No language chosen: the widget speaks its page's (<html lang>).
    expect((await c2c('integration', 'widget', created.integration_id, '--position', 'top-left')).json.widget).toEqual({ position: 'top-left', language: 'page' });
    expect((await c2c('integration', 'widget', created.integration_id, '--language', 'fr')).json.widget).toEqual({ position: 'top-left', language: 'fr' });
    expect((await c2c('integration', 'widget', created.integration_id, '--language', 'français')).code).toBe(1);
    expect((await c2c('integration', 'widget', created.integration_id)).code).toBe(1);
    expect((await c2c('integration', 'widget', created.integration_id, '--position', 'middle')).code).toBe(1);
    const session = await h.app.inject({
      method: 'POST',
      url: '/api/v1/click2call/sessions',
      headers: { authorization: `Bearer ${created.server_key}` },
      payload: { integration_id: created.integration_id, agent: { type: 'email', value: 'zoe@zeta.example' }, origin: 'https://zeta.example' },
    });
    expect(session.statusCode).toBe(201);
    expect(session.json().policy.widget).toMatchObject({ position: 'top-left', language: 'fr' });
    expect((await c2c('integration', 'widget', created.integration_id, '--language', 'page')).json.widget).toEqual({ position: 'top-left', language: 'page' });
    // stored as a string, as every earlier release reads it (a null made their nodes answer 500 beside newer ones)
    const storedLanguage = async (id: string) =>
      (await h.services.db.query<{ language: unknown }>("SELECT widget_defaults->'language' AS language FROM integrations WHERE id = $1", [id]))[0]!.language;
    expect(await storedLanguage(created.integration_id)).toBe('page');
    const fresh = (await c2c('integration', 'create', '--account', account, '--name', 'Zeta Desk', '--origin', 'https://zeta.example')).json;
    expect(await storedLanguage(fresh.integration_id)).toBe('page');
    // a null, as a node of the release with migration 011 wrote it, reads as `page`
    await h.services.db.query(`UPDATE integrations SET widget_defaults = jsonb_set(widget_defaults, '{language}', 'null') WHERE id = $1`, [created.integration_id]);
    h.services.bus.publish({ type: 'integration', integrationId: created.integration_id });
    const again = await h.app.inject({
      method: 'POST',
      url: '/api/v1/click2call/sessions',
      headers: { authorization: `Bearer ${created.server_key}` },
      payload: { integration_id: created.integration_id, agent: { type: 'email', value: 'zoe@zeta.example' }, origin: 'https://zeta.example' },
    });
    expect(again.json().policy.widget).toEqual({ position: 'top-left', language: 'page', window_mode: 'popup' });
  });

  it("sets an account's provider credentials, the token read from a file (out of shell history), refusing malformed ones", async () => {
    const account = (await c2c('account', 'create', '--name', 'Eta')).json.id as string;
    const sid = `AC${'0123456789abcdef'.repeat(2)}`;
    const token = 'fedcba9876543210'.repeat(2);
    const set = await runCommand(['account', 'set-provider', account, '--sid', sid, '--file', 'token.txt'], async () => h.services, { 'token.txt': `${token}\n` });
    expect(set.code).toBe(0);
    const [row] = await h.services.db.query<{ provider_account_sid: string; provider_auth_token: string }>('SELECT provider_account_sid, provider_auth_token FROM accounts WHERE id = $1', [account]);
    expect(row).toEqual({ provider_account_sid: sid, provider_auth_token: token });
    expect(set.stdout.join('\n')).not.toContain(token);
    expect((await c2c('account', 'set-provider', account, '--sid', 'AC123', '--token', token)).code).toBe(1);
    expect((await c2c('account', 'set-provider', account, '--sid', sid, '--token', 'short')).code).toBe(1);
    expect((await c2c('account', 'set-provider', account, '--sid', sid)).code).toBe(1);
  });

  it("sets the API key and TwiML App the Twilio driver signs windows' tokens with, the secret read from a file, kept while the Twilio account stays", async () => {
    const account = (await c2c('account', 'create', '--name', 'Iota')).json.id as string;
    const sid = `AC${'0123456789abcdef'.repeat(2)}`;
    const token = 'fedcba9876543210'.repeat(2);
    const keySid = `SK${'00112233445566778899aabbccddeeff'}`;
    const secret = 'Sup3rS3cretSup3rS3cretSup3rS3cre';
    const appSid = `AP${'ffeeddccbbaa99887766554433221100'}`;
    const files = { 'token.txt': `${token}\n`, 'secret.txt': `${secret}\n` };
    const full = ['account', 'set-provider', account, '--sid', sid, '--file', 'token.txt', '--api-key', keySid, '--api-key-secret-file', 'secret.txt', '--twiml-app', appSid];
    const set = await runCommand(full, async () => h.services, files);
    expect(set.code, set.stderr.join('\n')).toBe(0);
    const stored = () =>
      h.services.db.query('SELECT provider_api_key_sid, provider_api_key_secret, provider_twiml_app_sid FROM accounts WHERE id = $1', [account]).then(([row]) => row);
    expect(await stored()).toEqual({ provider_api_key_sid: keySid, provider_api_key_secret: secret, provider_twiml_app_sid: appSid });
    const shown = await runCommand(['account', 'show', account], async () => h.services);
    expect(shown.stdout.join('\n')).toContain(`API key ${keySid}, TwiML App ${appSid}`);
    for (const output of [set.stdout, shown.stdout, (await c2c('account', 'show', account)).stdout]) expect(output.join('\n')).not.toContain(secret);

    const refused = async (...argv: string[]) => {
      const run = await runCommand(['account', 'set-provider', account, '--sid', sid, '--file', 'token.txt', ...argv], async () => h.services, files);
      expect(run.code, argv.join(' ')).toBe(1);
      expect(await stored(), argv.join(' ')).toEqual({ provider_api_key_sid: keySid, provider_api_key_secret: secret, provider_twiml_app_sid: appSid });
    };
    await refused('--api-key', keySid);
    await refused('--api-key-secret-file', 'secret.txt');
    await refused('--api-key', 'SK123', '--api-key-secret-file', 'secret.txt');
    await refused('--api-key', keySid, '--api-key-secret-file', 'token.txt', '--twiml-app', 'AP123');
    expect((await runCommand(['account', 'set-provider', account, '--sid', sid, '--file', '-', '--api-key', keySid, '--api-key-secret-file', '-'], async () => h.services, { '-': token })).code).toBe(1);

    // A secret pasted into a SID's flag is refused without being printed.
    const pasted = await runCommand(['account', 'set-provider', account, '--sid', sid, '--file', 'token.txt', '--twiml-app', secret], async () => h.services, files);
    expect(pasted.code).toBe(1);
    expect(pasted.stderr.join('\n') + pasted.stdout.join('\n')).not.toContain(secret);

    // The auth token rotated (the same Account SID, even typed in capitals): the key and the app are kept, nothing said.
    const rotated = '0123456789abcdef'.repeat(2);
    const same = await runCommand(['account', 'set-provider', account, '--sid', `AC${sid.slice(2).toUpperCase()}`, '--token', rotated], async () => h.services);
    expect([same.code, same.stderr]).toEqual([0, []]);
    expect(await stored()).toEqual({ provider_api_key_sid: keySid, provider_api_key_secret: secret, provider_twiml_app_sid: appSid });
    // Another Twilio account: they were the old one's, and are emptied, with a warning.
    const otherSid = `AC${'fedcba9876543210'.repeat(2)}`;
    const moved = await runCommand(['account', 'set-provider', account, '--sid', otherSid, '--token', rotated], async () => h.services);
    expect(moved.code).toBe(0);
    expect(moved.stderr.join('\n')).toContain('the API key and TwiML App');
    expect(await stored()).toEqual({ provider_api_key_sid: null, provider_api_key_secret: null, provider_twiml_app_sid: null });
    const [row] = await h.services.db.query<{ provider_account_sid: string }>('SELECT provider_account_sid FROM accounts WHERE id = $1', [account]);
    expect(row!.provider_account_sid).toBe(otherSid);
  });

  it("sets the numbers whose incoming calls ring an integration's agents, one integration's each, shown with the integration", async () => {
    const account = (await c2c('account', 'create', '--name', 'Kappa')).json.id as string;
    const first = (await c2c('integration', 'create', '--account', account, '--name', 'K1')).json.integration_id as string;
    const second = (await c2c('integration', 'create', '--account', account, '--name', 'K2')).json.integration_id as string;
    expect((await c2c('integration', 'numbers', first, '+12025550162', '+12025550161')).json).toEqual({ integration_id: first, incoming_numbers: ['+12025550161', '+12025550162'] });
    expect((await c2c('integration', 'show', first)).json.incoming_numbers).toEqual(['+12025550161', '+12025550162']);
    const taken = await c2c('integration', 'numbers', second, '+12025550162');
    expect([taken.code, taken.stderr.join('\n')]).toEqual([1, expect.stringContaining(first)]);
    expect((await c2c('integration', 'numbers', first, 'not-a-number')).code).toBe(1);
    expect((await c2c('integration', 'numbers', first)).code).toBe(1);
    expect((await c2c('integration', 'show', first)).json.incoming_numbers).toEqual(['+12025550161', '+12025550162']);
    expect((await c2c('integration', 'numbers', first, '--none')).json.incoming_numbers).toEqual([]);
    expect((await c2c('integration', 'numbers', second, '+12025550162')).json.incoming_numbers).toEqual(['+12025550162']);
    expect((await c2c('integration', 'numbers', 'c2c_nope', '+12025550163')).code).toBe(1);
  });

  it('exits non-zero when a command is left incomplete, and zero when help is asked for', async () => {
    expect((await runCommand(['platform'], async () => h.services)).code).toBe(1);
    expect((await runCommand([], async () => h.services)).code).toBe(1);
    expect((await runCommand(['platform', '--help'], async () => h.services)).code).toBe(0);
    expect((await runCommand(['--help'], async () => h.services)).stdout.join('\n')).toContain('serve');
  });

  it('refuses lines that are not origins, names them, and saves nothing', async () => {
    const account = await c2c('account', 'create', '--name', 'Gamma');
    const created = await c2c('integration', 'create', '--account', account.json.id, '--name', 'G', '--origin', 'https://ok.example');
    const id = created.json.integration_id;
    const refused = await c2c('integration', 'origins', id, '--origin', 'https://fine.example', '--origin', 'https://bad.example/path', '--origin', 'not an origin', '--origin', 'https://evil.example\\.ok.example', '--origin', 'http:slashless.example', '--origin', 'https:/one-slash.example');
    expect(refused.code).toBe(1);
    // what the URL parser would make an origin of, but is not written as one
    expect(refused.stderr.join('\n')).toContain('http:slashless.example');
    expect(refused.stderr.join('\n')).toContain('https:/one-slash.example');
    expect(refused.stderr.join('\n')).toContain('https://bad.example/path');
    // a backslash is a path to the URL parser: that line is https://evil.example, not a host under ok.example
    expect(refused.stderr.join('\n')).toContain('https://evil.example');
    expect(refused.stderr.join('\n')).toContain('not an origin');
    const [row] = await h.services.db.query<any>('SELECT allowed_origins FROM integrations WHERE id = $1', [id]);
    expect(row.allowed_origins).toEqual(['https://ok.example']);
    const accepted = await c2c('integration', 'origins', id, '--origin', 'https://fine.example', '--origin', 'HTTPS://Other.Example:8443');
    expect(accepted.json.allowed_origins).toEqual(['https://fine.example', 'https://other.example:8443']);
  });

  it('warns of Allow all origins until it is switched off: with it on, after every command on that integration', async () => {
    const account = await c2c('account', 'create', '--name', 'Open');
    const id = (await c2c('integration', 'create', '--account', account.json.id, '--name', 'O', '--origin', 'https://o.example')).json.integration_id;
    const on = await runCommand(['integration', 'allow-all', id, 'on'], async () => h.services);
    expect(on.stdout.join('\n')).toContain(`WARNING: integration ${id} allows all origins`);
    const policy = await c2c('integration', 'policy', id, '--inbound', 'off');
    expect(policy.code).toBe(0);
    expect(policy.stderr.map((line) => JSON.parse(line))).toEqual([{ warning: expect.stringContaining(`c2c integration allow-all ${id} off`) }]);
    // and as a server starts (api/serve.ts): a warning, which never stops the start
    const said: string[] = [];
    await warnOfAllowAll(h.services.db, (message) => said.push(message));
    expect(said).toContain(allowAllWarning(id));
    const failing = { query: async () => Promise.reject(new Error('the store is away')) } as unknown as typeof h.services.db;
    const failed: string[] = [];
    await warnOfAllowAll(failing, (message) => failed.push(message));
    expect(failed).toEqual([expect.stringContaining('the store is away')]);
    await c2c('integration', 'allow-all', id, 'off');
    const quiet = await c2c('integration', 'policy', id, '--inbound', 'on');
    expect([quiet.code, quiet.stderr]).toEqual([0, []]);
    const after: string[] = [];
    await warnOfAllowAll(h.services.db, (message) => after.push(message));
    expect(after.some((message) => message.includes(id))).toBe(false);
  });

  it('switches the platform off and on', async () => {
    expect((await c2c('platform', 'disable')).json).toEqual({ disabled: true });
    expect(await h.services.platform.isDisabled()).toBe(true);
    expect((await c2c('platform', 'enable')).json).toEqual({ disabled: false });
  });

  it.skipIf(!redisUrl())("warns that a change made through a node cut off from Redis reaches the nodes that can reach it only later; a read, or a change with Redis up, says nothing", async () => {
    const redis = await ownRedis();
    const bus = await createRedisBus(redis.url);
    try {
      await busReaches(bus, 'up', 'the bus to be up');
      const onNode = async () => ({ ...h.services, bus });
      const up = await runCommand(['platform', 'disable'], onNode);
      expect([up.code, up.stderr]).toEqual([0, []]);
      await redis.stop();
      await busReaches(bus, 'down', 'the bus to notice Redis is gone');
      const cutOff = await runCommand(['platform', 'enable'], onNode);
      expect(cutOff.code).toBe(0);
      expect(cutOff.stdout).toEqual(['platform enabled']);
      expect(cutOff.stderr).toEqual([`warning: ${UNHEARD_CHANGE}`]);
      expect(await h.services.platform.isDisabled()).toBe(false);
      const read = await runCommand(['platform', 'status'], onNode);
      expect([read.code, read.stderr]).toEqual([0, []]);
      // a show reads, and so does the allow-all check after every integration command
      const integration = (await runCommand(['--json', 'integration', 'create', '--account', (await c2c('account', 'create', '--name', 'Cut Off')).json.id, '--name', 'Cut', '--origin', 'https://cut.example'], async () => h.services)).stdout.join('\n');
      const shown = await runCommand(['integration', 'show', JSON.parse(integration).integration_id], onNode);
      expect([shown.code, shown.stderr]).toEqual([0, []]);
    } finally {
      await bus.close();
      await redis.stop();
    }
  }, 40_000);

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

  it('reads amounts as written by hand, to the millionth, and answers with what was stored', async () => {
    const account = (await c2c('account', 'create', '--name', 'Zeta', '--balance', '0.000001')).json;
    expect(account.balance_micros).toBe(1);
    for (const amount of ['0x19', '1e3', '12.3456789', '12.', '.5', ' ', 'Infinity', '99999999999']) {
      const refused = await c2c('account', 'fund', account.id, amount);
      expect([refused.code, refused.stderr.join('\n')], amount).toEqual([1, expect.stringMatching(/expected an amount/)]);
    }
    expect((await c2c('account', 'fund', account.id, '12.345678')).json.balance_micros).toBe(12_345_679);
    expect((await c2c('rate', 'set', '+45', '0.0125')).json).toEqual({ prefix: '+45', per_minute: 0.0125 });
    const [rate] = await h.services.db.query<{ per_minute_micros: number }>("SELECT per_minute_micros FROM rates WHERE prefix = '+45'");
    expect(Number(rate!.per_minute_micros)).toBe(12_500);
  });

  it('with --json, says every refusal on standard error in the envelope, with its code: a parse error, a bad value, an unknown id', async () => {
    for (const argv of [['account', 'fund', 'acc_x'], ['account', 'fund', 'acc_x', 'abc'], ['account', 'show', 'acc_nope'], ['integration', 'policy', 'c2c_x', '--numbers', 'sometimes']]) {
      const refused = await c2c(...argv);
      expect(refused.code, argv.join(' ')).toBe(1);
      expect(refused.stdout, argv.join(' ')).toEqual([]);
      expect(refused.stderr.map((line) => JSON.parse(line)), argv.join(' ')).toEqual([{ ok: false, error: 'invalid_request', message: expect.any(String) }]);
    }
  });

  it('exits 3 when the store fails mid-step (the change may be kept: its COMMIT answer lost), 1 when the environment refuses it', async () => {
    const failing = async () => {
      const db = { ...h.services.db, tx: async () => Promise.reject(new C2CError('service_unavailable', 'The database did not answer in time.')) };
      return { ...h.services, db } as typeof h.services;
    };
    const lost = await runCommand(['--json', 'account', 'fund', 'acc_x', '5'], failing);
    expect(lost.code).toBe(3);
    expect(lost.stderr.map((line) => JSON.parse(line))).toEqual([{ ok: false, error: 'outcome_unknown', message: expect.stringContaining('may or may not have run') }]);
    // a read changed nothing, whatever the store did: it is refused for now, to be asked again
    const reading = async () => {
      const db = { ...h.services.db, query: async () => Promise.reject(new C2CError('service_unavailable', 'The database did not answer in time.')) };
      return { ...h.services, db } as typeof h.services;
    };
    const read = await runCommand(['--json', 'account', 'show', 'acc_x'], reading);
    expect(read.code).toBe(1);
    expect(read.stderr.map((line) => JSON.parse(line))).toEqual([{ ok: false, error: 'service_unavailable', message: expect.any(String) }]);
    const unconfigured = await runCommand(['--json', 'account', 'fund', 'acc_x', '5'], async () => Promise.reject(new ConfigError('no store in C2C_DATA_DIR')));
    expect(unconfigured.code).toBe(1);
    expect(unconfigured.stderr.map((line) => JSON.parse(line))).toEqual([{ ok: false, error: 'invalid_request', message: 'no store in C2C_DATA_DIR' }]);
  });

  it('checks what it is given before it opens the store: a typo is refused for itself, not for the store', async () => {
    let opened = 0;
    const counting = async () => {
      opened += 1;
      return h.services;
    };
    for (const argv of [
      ['account', 'fund', 'acc_x', 'abc'],
      ['integration', 'allow-all', 'c2c_x', 'maybe'],
      ['integration', 'identifier-mode', 'c2c_x', 'phone'],
      ['integration', 'window-mode', 'c2c_x', 'iframe'],
      ['rate', 'set', '+1', 'free'],
    ]) {
      const refused = await runCommand(argv, counting);
      expect(refused.code, argv.join(' ')).toBe(1);
    }
    expect(opened).toBe(0);
  });

  it('adds up a repeated list flag, refuses an empty caller ID or integration name, and shows the widget defaults', async () => {
    const account = (await c2c('account', 'create', '--name', 'Eta')).json.id as string;
    const integration = (await c2c('integration', 'create', '--account', account, '--name', 'Eta CRM', '--countries', 'US', '--countries', 'GB,FR')).json.integration_id as string;
    const shown = await c2c('integration', 'show', integration);
    expect(shown.json.policy.destination_countries).toEqual(['US', 'GB', 'FR']);
    expect(shown.json.policy.premium_rate_allowed).toBe(false); // off unless the operator says so
    expect((await c2c('integration', 'policy', integration, '--premium-rate', 'on')).code).toBe(0);
    expect((await c2c('integration', 'show', integration)).json.policy.premium_rate_allowed).toBe(true);
    expect(shown.json.widget).toEqual({ position: 'bottom-right', language: 'page' });
    const a = (await c2c('member', 'create', '--account', account, '--email', 'a@eta.example', '--name', 'A')).json.id as string;
    const b = (await c2c('member', 'create', '--account', account, '--email', 'b@eta.example', '--name', 'B')).json.id as string;
    expect((await c2c('integration', 'coverage', integration, '--mode', 'members', '--members', a, '--members', b)).code).toBe(0);
    expect((await c2c('integration', 'show', integration)).json.coverage.member_ids.sort()).toEqual([a, b].sort());
    // an unset variable ($CALLER_ID) would otherwise store a caller ID that refuses every outgoing call
    for (const argv of [['integration', 'policy', integration, '--caller-id', ''], ['integration', 'override', integration, a, '--caller-id', '']]) {
      const refused = await c2c(...argv);
      expect([refused.code, refused.stderr.join('\n')], argv.join(' ')).toEqual([1, expect.stringContaining('caller ID')]);
    }
    expect((await c2c('integration', 'show', integration)).json.policy.caller_id).toBeNull();
    // the name the call window's consent question shows
    const unnamed = await c2c('integration', 'create', '--account', account, '--name', '  ');
    expect([unnamed.code, unnamed.stderr.join('\n')]).toEqual([1, expect.stringContaining('needs a name')]);
    // every override can be removed again ("inherit"): the integration's value applies again
    const overrides = async () => (await c2c('integration', 'show', integration)).json.members.find((m: { member_id: string }) => m.member_id === a)?.overrides ?? {};
    expect((await c2c('integration', 'override', integration, a, '--outbound', 'off', '--inbound', 'off', '--numbers', 'hide', '--controls', 'mute', '--max-call-seconds', '600', '--calls', 'off', '--caller-id', '+12025550100')).code).toBe(0);
    expect(await overrides()).toEqual({ outbound: false, inbound: false, number_visibility: 'hide', controls: ['mute'], max_call_seconds: 600, calls_enabled: false, caller_id: '+12025550100' });
    expect((await c2c('integration', 'override', integration, a, '--outbound', 'inherit', '--controls', 'inherit', '--max-call-seconds', 'inherit')).code).toBe(0);
    expect(await overrides()).toEqual({ inbound: false, number_visibility: 'hide', calls_enabled: false, caller_id: '+12025550100' });
    expect((await c2c('integration', 'override', integration, a, '--inbound', 'inherit', '--numbers', 'inherit', '--calls', 'inherit', '--caller-id', 'inherit')).code).toBe(0);
    expect(await overrides()).toEqual({});
    // an integration's own policy has nothing to inherit from
    expect((await c2c('integration', 'policy', integration, '--outbound', 'inherit')).code).toBe(1);
    const on = await c2c('integration', 'allow-all', integration, 'on');
    expect(on.json).toEqual({ integration_id: integration, allow_all_origins: true, warning: allowAllWarning(integration) });
  });

  it('reads back what a command whose answer was lost may have done: an account, its departments and integrations', async () => {
    const account = (await c2c('account', 'create', '--name', 'Theta', '--balance', '10')).json.id as string;
    expect((await c2c('account', 'fund', account, '5')).code).toBe(0);
    expect((await c2c('account', 'show', account)).json).toEqual({
      id: account,
      kind: 'business',
      name: 'Theta',
      status: 'active',
      balance_micros: 15_000_000,
      currency: 'USD',
      provider_account_sid: expect.stringMatching(/^AC/),
      provider_api_key_sid: null,
      provider_twiml_app_sid: null,
    });
    const sales = (await c2c('department', 'create', '--account', account, '--name', 'Sales')).json.id as string;
    const again = await c2c('department', 'create', '--account', account, '--name', 'Sales');
    expect([again.code, again.stderr.join('\n')]).toEqual([1, expect.stringContaining(sales)]);
    expect((await c2c('department', 'list', '--account', account)).json).toEqual([{ id: sales, name: 'Sales' }]);
    const created = (await c2c('integration', 'create', '--account', account, '--name', 'Theta CRM')).json;
    const listed = await c2c('integration', 'list', '--account', account);
    expect(listed.json).toEqual([{ integration_id: created.integration_id, name: 'Theta CRM', status: 'active', allow_all_origins: false, live_server_keys: 1 }]);
    expect(JSON.stringify(listed.json)).not.toContain(created.server_key.slice(-12));
    for (const argv of [['account', 'show', 'acc_nope'], ['department', 'list', '--account', 'acc_nope'], ['integration', 'list', '--account', 'acc_nope']]) {
      expect((await c2c(...argv)).code, argv.join(' ')).toBe(1);
    }
  });

  it("closes an integration's call windows (a leaked key's): their tokens stop, their calls go on orphaned, and agents pair again", async () => {
    const t = await seedTenant(h.services);
    const api = client(h.app);
    const agent = await readyAgent(api, t);
    const requested = await api.post('/calls', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: '+12025550123' }, { auth: t.serverKey });
    expect(requested.status).toBe(202);
    const id = requested.body.request_id as string;
    expect((await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
    await h.clock.advanceSeconds(3);
    const closed = await c2c('integration', 'close-windows', t.integrationId);
    expect(closed.json).toEqual({ integration_id: t.integrationId, closed: 1 });
    expect((await api.post('/engine/heartbeat', { state: 'ready', mic_ready: true, call_id: null }, { auth: agent.engineToken })).status).toBe(401);
    expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body).toMatchObject({ status: 'connected', orphaned: true });
    expect((await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
    // the agent opens a window again
    expect((await readyAgent(api, t)).engineToken).toMatch(/^c2ce_/);
    expect((await c2c('integration', 'close-windows', 'c2c_nope')).code).toBe(1);
  });

  it("refuses integration-wide settings on a member's overrides rather than ignoring them", async () => {
    const refused = await c2c('integration', 'override', 'c2c_x', 'mem_x', '--countries', 'FR');
    expect(refused.code).toBe(1);
    expect(refused.stderr.join('\n')).toContain('--countries');
    expect((await c2c('integration', 'override', 'c2c_x', 'mem_x', '--concurrency', '2')).code).toBe(1);
  });
});

describe('the admin bridge', () => {
  it('listens on loopback apart from the API (a proxy in front of the API cannot reach it) and serves holders of the token only', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bridge-'));
    // one left behind readable by all (mode applies only to a file being created): written anew
    writeFileSync(join(dataDir, 'admin.json'), '{}', { mode: 0o644 });
    const h = await createHarness('pglite', { dataDir });
    const app = await buildApp(h.services, { logger: false });
    const bridge = await startAdminBridge(h.services);
    try {
      await app.ready();
      const admin = JSON.parse(readFileSync(join(dataDir, 'admin.json'), 'utf8')) as { url: string; token: string };
      expect(admin.url).toBe(bridge.url);
      expect(admin.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(statSync(join(dataDir, 'admin.json')).mode & 0o777).toBe(0o600);
      // the public API has no such route, whatever the caller holds
      const viaApi = await app.inject({ method: 'POST', url: ADMIN_PATH, headers: { authorization: `Bearer ${admin.token}` }, payload: { argv: ['platform', 'status'] } });
      expect(viaApi.statusCode).toBe(404);
      const post = (token: string, body: unknown) =>
        fetch(admin.url + ADMIN_PATH, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
      const served = await post(admin.token, { argv: ['--json', 'platform', 'status'] });
      expect(served.status).toBe(200);
      expect(await served.json()).toMatchObject({ code: 0, stdout: [expect.stringContaining('"disabled": false')] });
      const wrong = await post('0'.repeat(48), { argv: ['--json', 'platform', 'disable'] });
      expect([wrong.status, await wrong.json()]).toEqual([401, expect.objectContaining({ ok: false, error: 'unauthorized' })]);
      expect(await h.services.platform.isDisabled()).toBe(false);
      const garbled = await post(admin.token, '{"argv": [');
      expect([garbled.status, (await garbled.json()).error]).toEqual([422, 'invalid_request']);
      const huge = await post(admin.token, { argv: ['platform', 'status'], files: { x: 'a'.repeat(ADMIN_BODY_LIMIT) } });
      expect([huge.status, (await huge.json()).error]).toEqual([413, 'invalid_request']);
    } finally {
      await bridge.close();
      await app.close();
      await h.close();
    }
    expect(existsSync(join(dataDir, 'admin.json'))).toBe(false);
    rmSync(dataDir, { recursive: true, force: true });
  });
});

describe('two API nodes on one host, one data directory', () => {
  it("each writes admin.json anew as it starts; one stopping leaves the other's in place", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bridges-'));
    const h = await createHarness('pglite', { dataDir });
    const file = join(dataDir, 'admin.json');
    const held = () => JSON.parse(readFileSync(file, 'utf8')) as { url: string };
    const [first, second] = await Promise.all([startAdminBridge(h.services), startAdminBridge(h.services)]);
    try {
      const last = held().url;
      expect([first.url, second.url]).toContain(last);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      // the node whose file it is not stops: the other's stays, for the operators of this host
      const [other, owner] = last === first.url ? [second, first] : [first, second];
      await other.close();
      expect(held().url).toBe(owner.url);
      await owner.close();
      expect(existsSync(file)).toBe(false);
    } finally {
      await first.close();
      await second.close();
      await h.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!postgresUrl() || !redisUrl())('a step run on PostgreSQL directly (no server for its data directory)', () => {
  it("pushes what it changed to the agents' open widgets, on the nodes that hold their sockets, as a running node would", async () => {
    const database = await openTestDatabase('pg');
    const bus = await createRedisBus(redisUrl()!);
    const live = await createGatewayHarness('pg', {}, { database, bus });
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-direct-'));
    try {
      const t = await seedTenant(live.h.services);
      const agent = await readyAgent(client(live.h.app), t);
      const widget = openSocket(live.url, agent.widgetToken, ORIGIN);
      try {
        const first = await snapshotOf(widget);
        expect(first.policy.widget.window_mode).toBe('popup');
        const pushed = widget.next('state', { where: (state) => state.version > first.version });
        // the environment the nodes have, as an operator runs c2c with (the gateway's public address included)
        const config = loadConfig({ C2C_DATA_DIR: dataDir, DATABASE_URL: database.url!, REDIS_URL: redisUrl()!, PUBLIC_GATEWAY_URL: first.realtime.url, LOG_LEVEL: 'silent' });
        const result = await operate(['integration', 'window-mode', t.integrationId, 'tab'], config);
        expect(result, JSON.stringify(result)).toMatchObject({ code: 0 });
        const state = await pushed;
        expect(state.policy.widget.window_mode).toBe('tab');
        // what it says of push is what the nodes' own states say
        expect(state.realtime).toEqual(first.realtime);
      } finally {
        widget.close();
      }
    } finally {
      await live.close();
      await bus.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('the admin bridge stopping', () => {
  it('lets a command under way finish before it closes (the store closes after it), and takes no new one', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'c2c-bridge-drain-'));
    const h = await createHarness('pglite', { dataDir });
    // every statement and transaction of the command takes 300 ms more; the first says the command is running
    const db = h.services.db;
    let running: () => void = () => {};
    const commandRuns = new Promise<void>((resolve) => (running = resolve));
    const slow = async () => (running(), await new Promise((r) => setTimeout(r, 300)));
    const slowDb = new Proxy(db, {
      get: (target, prop) =>
        prop === 'query'
          ? async (text: string, params?: unknown[]) => (await slow(), target.query(text, params))
          : prop === 'tx'
            ? async (...args: Parameters<typeof db.tx>) => (await slow(), target.tx(...args))
            : Reflect.get(target, prop, target),
    });
    const bridge = await startAdminBridge({ ...h.services, db: slowDb } as typeof h.services);
    try {
      const admin = JSON.parse(readFileSync(join(dataDir, 'admin.json'), 'utf8')) as { url: string; token: string };
      const answer = fetch(admin.url + ADMIN_PATH, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ argv: ['--json', 'account', 'create', '--name', 'Drained Co'] }),
      });
      await commandRuns;
      const closed = bridge.close(5000);
      const reply = await answer;
      expect(reply.status).toBe(200);
      expect(await reply.json()).toMatchObject({ code: 0 });
      await closed;
      expect(existsSync(join(dataDir, 'admin.json'))).toBe(false);
      expect((await db.query('SELECT 1 FROM accounts WHERE name = $1', ['Drained Co'])).length).toBe(1);
      await expect(fetch(admin.url + ADMIN_PATH, { method: 'POST' })).rejects.toThrow();
    } finally {
      await bridge.close();
      await h.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('--file', () => {
  it('is read by the c2c process, relative to its own directory, and only its text reaches the command', () => {
    const dir = mkdtempSync(join(tmpdir(), 'c2c-files-'));
    try {
      writeFileSync(join(dir, 'origins.txt'), 'https://a.example\nhttps://b.example\n');
      expect(fileArguments(['integration', 'origins', 'c2c_x', '--file', 'origins.txt', '--file=-', '--', '--file', 'not-an-option'])).toEqual(['origins.txt', '-']);
      expect(fileArguments(['account', 'set-provider', 'acc_x', '--file', 't.txt', '--api-key-secret-file=s.txt'])).toEqual(['t.txt', 's.txt']);
      const read: Array<string | 0> = [];
      const files = readAttachedFiles(['integration', 'origins', 'c2c_x', '--file', 'origins.txt', '--file=-'], dir, (path) => {
        read.push(path);
        return path === 0 ? 'https://stdin.example' : readFileSync(path, 'utf8');
      });
      expect(read).toEqual([join(dir, 'origins.txt'), 0]);
      expect(files).toEqual({ 'origins.txt': 'https://a.example\nhttps://b.example\n', '-': 'https://stdin.example' });
      expect(() => readAttachedFiles(['integration', 'origins', 'c2c_x', '--file', 'missing.txt'], dir)).toThrow('cannot read --file missing.txt: ENOENT');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a command naming a file it was not sent the text of reads nothing and fails, saying so', async () => {
    const h = await createHarness('pglite');
    try {
      const account = await runCommand(['--json', 'account', 'create', '--name', 'Files'], async () => h.services);
      const created = await runCommand(['--json', 'integration', 'create', '--account', JSON.parse(account.stdout.join('')).id, '--name', 'F', '--origin', 'https://ok.example'], async () => h.services);
      const id = JSON.parse(created.stdout.join('')).integration_id;
      const unread = await runCommand(['integration', 'origins', id, '--file', '/etc/hostname'], async () => h.services);
      expect(unread.code).toBe(1);
      expect(unread.stderr.join('\n')).toContain('--file /etc/hostname was not read by the c2c command');
      const sent = await runCommand(['--json', 'integration', 'origins', id, '--file', 'o.txt'], async () => h.services, { 'o.txt': 'https://x.example\r\nhttps://y.example\n' });
      expect(JSON.parse(sent.stdout.join('')).allowed_origins).toEqual(['https://x.example', 'https://y.example']);
    } finally {
      await h.close();
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

  it('refuses a step on PostgreSQL directly without Redis, where no running node would hear of it, unless told no node runs', async () => {
    // a database that is not there: a step let through fails on reaching it, one refused never tries
    const onPostgres = { ...env, DATABASE_URL: 'postgres://c2c@127.0.0.1:1/nowhere' };
    const refused = await run(process.execPath, [BIN, 'platform', 'disable'], { env: onPostgres }).catch((e) => e);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('without REDIS_URL a change made on DATABASE_URL directly reaches no running node');
    expect(refused.stderr).toContain('C2C_NO_NODES_RUNNING=1');
    for (const [argv, allowed] of [
      [['platform', 'disable'], { C2C_NO_NODES_RUNNING: '1' }],
      [['platform', 'disable'], { REDIS_URL: 'redis://127.0.0.1:1' }],
      // a step that only reads changes nothing a node could miss
      [['platform', 'status'], {}],
    ] as Array<[string[], Record<string, string>]>) {
      const tried = await run(process.execPath, [BIN, ...argv], { env: { ...onPostgres, ...allowed } }).catch((e) => e);
      expect(tried.code).toBe(1);
      expect(tried.stderr).not.toContain('reaches no running node');
      expect(tried.stderr).toMatch(/PostgreSQL|DATABASE_URL/);
    }
  });

  it('works against the embedded store when no server runs, then through the running server', async () => {
    // A data directory with no store in it is a mistake (a typo, another directory): refused, and nothing made there.
    const refused = await run(process.execPath, [BIN, 'account', 'create', '--name', 'Nowhere Co'], { env }).catch((e) => e);
    expect([refused.code, refused.stderr]).toEqual([1, expect.stringContaining(`no store in C2C_DATA_DIR (${dataDir})`)]);
    expect(existsSync(join(dataDir, 'pglite'))).toBe(false);
    // once a server has run there, its store is
    const first = await startNode(loadConfig({ ...env, PORT: '0', GATEWAY_PORT: '0' }), { logger: false });
    await first.close();
    const offline = await run(process.execPath, [BIN, '--json', 'account', 'create', '--name', 'Offline Co'], { env });
    expect(JSON.parse(offline.stdout).name).toBe('Offline Co');
    // a simulated incoming call rings in a running node only: its ringing leg would end with this command
    const ringing = await run(process.execPath, [BIN, 'call', 'inbound', '--integration', 'c2c_demo', '--from', '+442079460123'], { env }).catch((e) => e);
    expect([ringing.code, ringing.stderr]).toEqual([1, expect.stringContaining('a simulated incoming call rings in a running node')]);

    node = await startNode(loadConfig({ ...env, PORT: '0' }), { logger: false });
    const online = await run(process.execPath, [BIN, '--json', 'platform', 'disable'], { env });
    expect(JSON.parse(online.stdout)).toEqual({ disabled: true });
    // The running server saw it at once: its own cache was updated by the command it ran.
    expect(await node.services.platform.isDisabled()).toBe(true);
    const accounts = await node.services.db.query<{ name: string }>('SELECT name FROM accounts');
    expect(accounts.map((a) => a.name)).toContain('Offline Co');
    await run(process.execPath, [BIN, 'platform', 'enable'], { env });

    // a --file goes with the command: read here, in the operator's directory, standard input included
    const account = JSON.parse((await run(process.execPath, [BIN, '--json', 'account', 'create', '--name', 'Files Co'], { env })).stdout);
    const created = JSON.parse((await run(process.execPath, [BIN, '--json', 'integration', 'create', '--account', account.id, '--name', 'F', '--origin', 'https://ok.example'], { env })).stdout);
    const operatorDir = mkdtempSync(join(tmpdir(), 'c2c-operator-'));
    try {
      writeFileSync(join(operatorDir, 'origins.txt'), 'https://from-file.example\n');
      const fromFile = await run(process.execPath, [BIN, '--json', 'integration', 'origins', created.integration_id, '--file', 'origins.txt'], { env, cwd: operatorDir });
      expect(JSON.parse(fromFile.stdout).allowed_origins).toEqual(['https://from-file.example']);
      // (not spawnSync: the server runs in this very process)
      const piped = run(process.execPath, [BIN, '--json', 'integration', 'origins', created.integration_id, '--file', '-'], { env, cwd: operatorDir });
      piped.child.stdin!.end('https://from-stdin.example\n');
      const fromStdin = await piped;
      expect(JSON.parse(fromStdin.stdout).allowed_origins).toEqual(['https://from-stdin.example']);
      const missing = await run(process.execPath, [BIN, 'integration', 'origins', created.integration_id, '--file', 'nope.txt'], { env, cwd: operatorDir }).catch((e) => e);
      expect([missing.code, missing.stderr]).toEqual([1, expect.stringContaining('cannot read --file nope.txt: ENOENT')]);
    } finally {
      rmSync(operatorDir, { recursive: true, force: true });
    }
    // the server was never blocked reading anything: it answers at once
    expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
  }, 90_000);

  it('runs commands through the bridge of a server whose API listens on one address only (HOST=::1)', async () => {
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

  it('says, without a stack, when the server its admin.json names does not take the command, and that nothing changed', async () => {
    const staleDir = mkdtempSync(join(tmpdir(), 'c2c-cli-stale-'));
    try {
      // a process that is alive (this one) but no bridge at that address: a server that is stopping, or a reused pid
      const closed = await new Promise<number>((resolve) => {
        const server = createServer().listen(0, '127.0.0.1', () => {
          const { port } = server.address() as AddressInfo;
          server.close(() => resolve(port));
        });
      });
      writeFileSync(join(staleDir, 'admin.json'), JSON.stringify({ pid: process.pid, url: `http://127.0.0.1:${closed}`, token: 'x' }), { mode: 0o600 });
      const failed = await run(process.execPath, [BIN, 'platform', 'disable'], { env: { ...env, C2C_DATA_DIR: staleDir } }).catch((e) => e);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain('did not take the command (ECONNREFUSED): nothing was changed');
      expect(failed.stderr).not.toContain('    at ');
    } finally {
      rmSync(staleDir, { recursive: true, force: true });
    }
  });

  it("takes an admin.json whose pid is another process's since (the server died; PID 1 in a container) for no server running", () => {
    const dir = mkdtempSync(join(tmpdir(), 'c2c-cli-reused-'));
    try {
      const admin = { url: 'http://127.0.0.1:9', token: 'x', pid: process.pid };
      writeFileSync(join(dir, 'admin.json'), JSON.stringify({ ...admin, start: startOf(process.pid) }), { mode: 0o600 });
      expect(findRunningServer(dir)).toMatchObject(admin);
      writeFileSync(join(dir, 'admin.json'), JSON.stringify({ ...admin, start: 'another process' }), { mode: 0o600 });
      expect(findRunningServer(dir)).toBeUndefined();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('exits 3, not 1, when the server took the command but its answer was lost: it may have run', async () => {
    const lostDir = mkdtempSync(join(tmpdir(), 'c2c-cli-lost-'));
    // a bridge that takes the command and drops the connection before answering
    const server = createServer((socket) => socket.once('data', () => socket.destroy()));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      writeFileSync(join(lostDir, 'admin.json'), JSON.stringify({ pid: process.pid, url: `http://127.0.0.1:${port}`, token: 'x' }), { mode: 0o600 });
      const failed = await run(process.execPath, [BIN, 'account', 'fund', 'acc_x', '5'], { env: { ...env, C2C_DATA_DIR: lostDir } }).catch((e) => e);
      expect(failed.code).toBe(3);
      expect(failed.stderr).toContain('may or may not have run');
      expect(failed.stderr).toContain('account show');
      const json = await run(process.execPath, [BIN, '--json', 'account', 'fund', 'acc_x', '5'], { env: { ...env, C2C_DATA_DIR: lostDir } }).catch((e) => e);
      expect(json.code).toBe(3);
      expect(JSON.parse(json.stderr.trim())).toEqual({ ok: false, error: 'outcome_unknown', message: expect.stringContaining('may or may not have run') });
    } finally {
      server.close();
      rmSync(lostDir, { recursive: true, force: true });
    }
  });

  it('does not open the embedded store while a server holds it without its bridge up (starting, or stopping), and says to try again', async () => {
    const busyDir = mkdtempSync(join(tmpdir(), 'c2c-cli-busy-'));
    // this process holds the store, as a server does before it listens and after its bridge is down
    const held = await openPglite(join(busyDir, 'pglite'));
    await migrate(held);
    try {
      const failed = await run(process.execPath, [BIN, 'account', 'create', '--name', 'Lost Co'], { env: { ...env, C2C_DATA_DIR: busyDir } }).catch((e) => e);
      expect(failed.code).toBe(1);
      expect(failed.stderr).toContain(`is open in process ${process.pid}`);
      expect(failed.stderr).toContain('Try again in a moment');
      expect(failed.stderr).not.toContain('    at ');
      expect(await held.query<{ name: string }>('SELECT name FROM accounts WHERE name = $1', ['Lost Co'])).toEqual([]);
    } finally {
      await held.close();
      rmSync(busyDir, { recursive: true, force: true });
    }
  });

  it('exits non-zero with a clear message on a bad configuration', async () => {
    const failed = await run(process.execPath, [BIN, 'platform', 'status'], { env: { ...env, PORT: 'eighty' } }).catch((e) => e);
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('PORT');
    // with --json, in the envelope a script can read
    const json = await run(process.execPath, [BIN, '--json', 'platform', 'status'], { env: { ...env, PORT: 'eighty' } }).catch((e) => e);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stderr.trim())).toEqual({ ok: false, error: 'invalid_request', message: expect.stringContaining('PORT') });
  });
});
