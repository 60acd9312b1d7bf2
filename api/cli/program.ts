/**
 * The `c2c` operator commands (spec section 1's setup steps, until the web console exists). The
 * same program runs in the CLI process against the store, or inside a running server through the
 * admin bridge (api/cli/admin-bridge.ts), so an embedded PGlite store is never opened twice.
 */
import { Command, InvalidArgumentError } from 'commander';
import type { Control, NumberVisibility, WidgetDefaults } from '../../shared/types.js';
import { PAGE_LANGUAGE } from '../../shared/schemas/resources.js';
import type { Services } from '../services.js';
import {
  createAccount,
  createDepartment,
  createMember,
  fundAccount,
  listDepartments,
  listMembers,
  showAccount,
  setAccountProvider,
  setAccountStatus,
  updateMember,
} from '../domain/operator/accounts.js';
import {
  createIntegration,
  allowAllWarning,
  describeIntegration,
  listIntegrations,
  mapIntegratorUuid,
  rotateServerKey,
  parseOriginLines,
  revokeServerKey,
  setAllowAllOrigins,
  setCoverage,
  setIdentifierMode,
  setIntegrationEnabled,
  setMemberOverrides,
  setOrigins,
  setPolicy,
  setWidgetDefaults,
  setWindowMode,
  type PolicySettings,
} from '../domain/operator/integrations.js';
import { closeIntegrationWindows, revokeIntegration } from '../domain/operator/revocation.js';
import { blockNumber, setIncomingNumbers, setRate, unblockNumber } from '../domain/operator/telephony.js';
import type { CoverageMode, WindowMode } from '../domain/integrations/model.js';
import { attachedText, type AttachedFiles } from './files.js';
import type { Output } from './output.js';

/**
 * The services a command runs on. `reading`: the command only reads (a store opened directly
 * then needs no bus to tell running nodes of a change: main.ts). `in-node`: what the command starts
 * lives on in the process that runs it (a simulated incoming call's ringing leg), so it runs in a
 * running node only.
 */
export type ServiceUse = 'reading' | 'in-node';
export type ServicesProvider = (use?: ServiceUse) => Promise<Services>;

const onOff = (value: string): boolean => {
  if (['on', 'true', 'yes', '1'].includes(value)) return true;
  if (['off', 'false', 'no', '0'].includes(value)) return false;
  throw new InvalidArgumentError('expected on or off');
};
const integer = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n)) throw new InvalidArgumentError('expected an integer');
  return n;
};
/** An amount as written by hand: digits, and at most six decimals (the store keeps millionths). */
const AMOUNT = /^(\d+)(?:\.(\d{1,6}))?$/;
/** Money on the command line is in currency units ("12.50"); the store keeps micros. Never negative: no command takes money away. */
const money = (value: string): number => {
  // Not Number(): it reads 0x19 as 25 and 1e3 as 1000, and rounds what the store could not keep.
  const parts = AMOUNT.exec(value.trim());
  if (!parts) throw new InvalidArgumentError(`expected an amount such as 12.50, with at most six decimals (0.000001 is the smallest kept), not "${value}"`);
  const micros = Number(parts[1]) * 1_000_000 + Number((parts[2] ?? '').padEnd(6, '0'));
  if (!Number.isSafeInteger(micros)) throw new InvalidArgumentError(`expected an amount below ${Math.floor(Number.MAX_SAFE_INTEGER / 1e6)}, not "${value}"`);
  return micros;
};
/** Millionths as an amount, for answers: what was stored. */
const amount = (micros: number): number => micros / 1_000_000;
/** A top-up: more than nothing. */
const topUp = (value: string): number => {
  const micros = money(value);
  if (micros <= 0) throw new InvalidArgumentError(`expected an amount above zero, not "${value}"`);
  return micros;
};
/** A comma-separated list; a repeated flag adds to it (--countries US --countries GB), as --origin does. */
const list = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), ...value.split(',').map((s) => s.trim()).filter(Boolean)];
const choice =
  <T extends string>(...values: T[]) =>
  (value: string): T => {
    if (!values.includes(value as T)) throw new InvalidArgumentError(`expected one of ${values.join(', ')}`);
    return value as T;
  };

interface PolicyFlags {
  outbound?: boolean;
  inbound?: boolean;
  numbers?: NumberVisibility;
  controls?: string[];
  maxCallSeconds?: number;
  callerId?: string;
  countries?: string[];
  premiumRate?: boolean;
  concurrency?: number;
}

function policyFromFlags(flags: PolicyFlags): PolicySettings {
  const controls = flags.controls?.filter((c) => c !== 'none');
  const bad = controls?.find((c) => c !== 'mute' && c !== 'dtmf');
  if (bad) throw new InvalidArgumentError(`unknown control ${bad} (mute, dtmf or none)`);
  return {
    outbound: flags.outbound,
    inbound: flags.inbound,
    numberVisibility: flags.numbers,
    controls: controls as Control[] | undefined,
    maxCallSeconds: flags.maxCallSeconds,
    callerId: flags.callerId === 'none' ? null : flags.callerId,
    destinationCountries: flags.countries?.map((c) => c.toUpperCase()),
    premiumRateAllowed: flags.premiumRate,
    concurrencyLimit: flags.concurrency,
  };
}

/** "inherit" given for a member override: it removes the override (the integration's value applies again). Not null: commander turns a parsed null into ''. */
const INHERIT = Symbol('inherit');
type Inheritable<T> = T | typeof INHERIT;
/** A member override's value, or INHERIT. */
const orInherit =
  <T>(parse: (value: string, previous: T | undefined) => T) =>
  (value: string, previous: Inheritable<T> | undefined): Inheritable<T> =>
    value === 'inherit' ? INHERIT : parse(value, previous === INHERIT ? undefined : previous);
/** An override's change: null removes it, undefined leaves it. */
const overrideOf = <T>(value: Inheritable<T> | undefined): T | null | undefined => (value === INHERIT ? null : value);

type Parser = (value: string, previous: unknown) => unknown;

/** What a member's overrides may change (per-member overrides, spec section 8); `inheritable`: each also takes "inherit". */
function withMemberPolicyOptions(command: Command, inheritable = false): Command {
  const parse = <T>(parser: (value: string, previous: T | undefined) => T): Parser => (inheritable ? orInherit(parser) : parser) as Parser;
  const or = inheritable ? '|inherit' : '';
  return command
    .option(`--outbound <on|off${or}>`, 'outgoing calls allowed', parse(onOff))
    .option(`--inbound <on|off${or}>`, 'incoming calls allowed', parse(onOff))
    .option(`--numbers <show|hide|masked${or}>`, 'number visibility', parse(choice<NumberVisibility>('show', 'hide', 'masked')))
    .option(`--controls <list${or}>`, 'in-call controls: mute,dtmf or none', parse(list))
    .option(`--max-call-seconds <n${or}>`, 'duration cap', parse(integer));
}

/** The integration's policy: the member options, and what only the integration sets. */
function withPolicyOptions(command: Command): Command {
  return withMemberPolicyOptions(command)
    .option('--caller-id <e164|none>', 'caller ID for outgoing calls ("none": no caller ID, so no outgoing calls)')
    .option('--countries <list>', 'destination countries, ISO codes: US,GB', list)
    .option('--premium-rate <on|off>', 'premium-rate numbers may be called (off by default: toll fraud)', onOff)
    .option('--concurrency <n>', 'concurrent call limit', integer);
}

/** Origin lines from --origin flags and a --file ("-": standard input), read by the operator's c2c process (files.ts). */
function originLines(options: { origin?: string[]; file?: string }, files: AttachedFiles): string[] {
  const lines = [...(options.origin ?? [])];
  if (options.file) lines.push(...attachedText(files, options.file).split(/\r?\n/));
  return lines;
}

export function buildProgram(services: ServicesProvider, out: Output, files: AttachedFiles = {}): Command {
  const program = new Command('c2c')
    .description('Click-to-call service: run it, and do the operator steps of spec section 1.')
    .option('--json', 'print JSON')
    .exitOverride()
    // commander's own parse errors are refusals like the others: the envelope with --json
    .configureOutput({ writeOut: (s) => out.lines.push(s.trimEnd()), writeErr: (s) => (out.json ? out.error(s.trim().replace(/^error: /, '')) : out.errors.push(s.trimEnd())) });
  const deps = async (use?: ServiceUse) => {
    const s = await services(use);
    return { db: s.db, bus: s.bus, clock: s.clock };
  };
  /** `<parent> list --account acc_…`: what an account has of one kind, a line each (a read: it runs wherever). */
  const listOfAccount = <T>(parent: Command, what: string, description: string, read: (deps: { db: Services['db'] }, accountId: string) => Promise<T[]>, line: (item: T) => string) =>
    parent
      .command('list')
      .description(description)
      .requiredOption('--account <accountId>')
      .action(async (o: { account: string }) => {
        const items = await read(await deps('reading'), o.account);
        out.result(items, items.length ? items.map(line).join('\n') : `account ${o.account} has no ${what}`);
      });

  // Run by the entry point itself (main.ts), never through a running server; named here for the help.
  program
    .command('serve')
    .description('run the service: the API, the real-time gateway, or both (c2c serve --help)')
    .allowUnknownOption()
    .action(() => {
      throw new InvalidArgumentError('c2c serve runs a node from the shell; it is not an operator step');
    });

  const account = program.command('account').description('accounts and wallets');
  account
    .command('create')
    .requiredOption('--name <name>')
    .option('--kind <personal|business>', 'account kind', choice('personal', 'business'), 'business')
    .option('--balance <amount>', 'opening balance in currency units', money, 0)
    .action(async (o: { name: string; kind: 'personal' | 'business'; balance: number }) => {
      const created = await createAccount(await deps(), { name: o.name, kind: o.kind, balanceMicros: o.balance });
      out.result(created, `account ${created.id} (${created.kind}) created`);
    });
  account.command('fund <accountId> <amount>').action(async (id: string, given: string) => {
    const micros = topUp(given);
    const balance = await fundAccount(await deps(), id, micros);
    out.result({ account_id: id, balance_micros: balance }, `balance of ${id}: ${(balance / 1e6).toFixed(2)}`);
  });
  account
    .command('show <accountId>')
    .description("its kind, status, balance and provider account, API key and TwiML App (never a secret): what a lost answer left behind")
    .action(async (id: string) => {
      const shown = await showAccount(await deps('reading'), id);
      out.result(shown, `account ${shown.id} "${shown.name}" (${shown.kind}, ${shown.status}): balance ${(shown.balance_micros / 1e6).toFixed(2)} ${shown.currency}; provider account ${shown.provider_account_sid}, API key ${shown.provider_api_key_sid ?? 'none'}, TwiML App ${shown.provider_twiml_app_sid ?? 'none'}`);
    });
  for (const [name, status] of [['suspend', 'suspended'], ['activate', 'active']] as const) {
    account.command(`${name} <accountId>`).action(async (id: string) => {
      await setAccountStatus(await deps(), id, status);
      out.result({ account_id: id, status }, `account ${id} is ${status}`);
    });
  }
  account
    .command('set-provider <accountId>')
    .description(
      "the account's Twilio credentials: Account SID and auth token (webhooks are verified against them); with VOICE_PROVIDER=twilio also an API key and the TwiML App (the call windows' tokens), kept when left out and the Account SID stays, emptied when it changes",
    )
    .requiredOption('--sid <accountSid>')
    .option('--token <authToken>', 'the auth token (it stays in your shell history: prefer --file)')
    .option('--file <file>', 'read the auth token from this file ("-" for standard input)')
    .option('--api-key <apiKeySid>', 'the API key (SK…) that signs call windows\' access tokens; with --api-key-secret-file')
    .option('--api-key-secret-file <file>', 'read the API key\'s secret from this file ("-" for standard input)')
    .option('--twiml-app <appSid>', 'the TwiML App (AP…) whose voice URL is this service\'s voice webhook')
    .action(async (id: string, o: { sid: string; token?: string; file?: string; apiKey?: string; apiKeySecretFile?: string; twimlApp?: string }) => {
      if ((o.token === undefined) === (o.file === undefined)) throw new InvalidArgumentError('give the auth token with --file (or "-" for standard input), or --token');
      if ((o.apiKey === undefined) !== (o.apiKeySecretFile === undefined)) throw new InvalidArgumentError('--api-key and --api-key-secret-file go together');
      if (o.file === '-' && o.apiKeySecretFile === '-') throw new InvalidArgumentError('standard input can hold one secret: give the other in a file');
      const token = o.token ?? attachedText(files, o.file!).trim();
      const apiKey = o.apiKey === undefined ? undefined : { sid: o.apiKey, secret: attachedText(files, o.apiKeySecretFile!).trim() };
      const { emptied } = await setAccountProvider(await deps(), id, { accountSid: o.sid, authToken: token, apiKey, twimlAppSid: o.twimlApp });
      out.result({ account_id: id }, `provider credentials of ${id} set`);
      if (emptied) {
        out.warn('the Account SID changed, so the API key and TwiML App (the old account\'s) were emptied: windows on Twilio get no token until --api-key, --api-key-secret-file and --twiml-app are given');
      }
    });

  const department = program.command('department').description('departments');
  department
    .command('create')
    .requiredOption('--account <accountId>')
    .requiredOption('--name <name>')
    .action(async (o: { account: string; name: string }) => {
      const created = await createDepartment(await deps(), o.account, o.name);
      out.result(created, `department ${created.id} created`);
    });
  listOfAccount(department, 'departments', "an account's departments: id and name", listDepartments, (d) => `${d.id}  ${d.name}`);

  const member = program.command('member').description('members (agents)');
  member
    .command('create')
    .requiredOption('--account <accountId>')
    .requiredOption('--email <email>', 'login e-mail')
    .requiredOption('--name <name>')
    .option('--uuid <uuid>', 'stable UUID (generated when omitted)')
    .option('--department <departmentId>')
    .option('--disabled', 'create with calls disabled')
    .action(async (o: { account: string; email: string; name: string; uuid?: string; department?: string; disabled?: boolean }) => {
      const created = await createMember(await deps(), {
        accountId: o.account,
        email: o.email,
        name: o.name,
        uuid: o.uuid,
        departmentId: o.department ?? null,
        enabled: !o.disabled,
      });
      out.result(created, `member ${created.id} <${created.email}> uuid ${created.uuid}`);
    });
  listOfAccount(member, 'members', "an account's members: id, e-mail, stable UUID, department, and whether calls are enabled", listMembers, (m) =>
    `${m.id}  ${m.email}  uuid ${m.uuid}  ${m.name}${m.department_name ? `  (${m.department_name})` : ''}${m.removed ? '  removed' : m.enabled ? '' : '  calls disabled'}`,
  );
  for (const [name, change] of [
    ['enable', { enabled: true }],
    ['disable', { enabled: false }],
    ['remove', { removed: true }],
  ] as const) {
    member.command(`${name} <memberId>`).action(async (id: string) => {
      await updateMember(await deps(), id, change);
      out.result({ member_id: id, ...change }, `member ${id}: ${name}d`);
    });
  }

  const integration = program.command('integration').description('integrations, keys, origins, policy, coverage');
  // Spec section 1: the Allow all origins warning shows until it is switched off: after every
  // command on such an integration (allow-all on says it in its own answer).
  // Best effort: the command has succeeded, and a failed look must not make it seem it did not
  // (a script would run it again: rotate-key twice kills the key it just stored).
  integration.hook('postAction', async (_integration, action) => {
    const id = action.args[0];
    if (action.name() === 'allow-all' || typeof id !== 'string') return;
    try {
      const [row] = await (await deps('reading')).db.query<{ allow_all_origins: boolean }>(
        `SELECT allow_all_origins FROM integrations WHERE id = $1 AND status <> 'revoked'`,
        [id],
      );
      if (row?.allow_all_origins) out.warn(allowAllWarning(id));
    } catch {
      // no warning this time; the next command or the next server start says it
    }
  });
  listOfAccount(integration, 'integrations', "an account's integrations: id, name, status, live server keys (never a key)", listIntegrations, (i) =>
    `${i.integration_id}  "${i.name}"  ${i.status}  live server keys: ${i.live_server_keys}${i.allow_all_origins ? '  (allow all origins: ON)' : ''}`,
  );
  integration
    .command('show <integrationId>')
    .description('its settings, origins, policy, coverage, members\' UUIDs and overrides, and incoming numbers (never a key)')
    .action(async (id: string) => {
      const shown = await describeIntegration(await deps('reading'), id);
      out.result(
        shown,
        [
          `${shown.integration_id} "${shown.name}" (${shown.status}) of account ${shown.account_id}`,
          `allowed origins: ${shown.allowed_origins.join(' ') || '(none)'}${shown.allow_all_origins ? '  (allow all origins: ON)' : ''}`,
          `identifier mode: ${shown.identifier_mode}; window mode: ${shown.window_mode}; widget: ${shown.widget.position}, ${shown.widget.language === PAGE_LANGUAGE ? "the page's language" : shown.widget.language}`,
          `policy: ${JSON.stringify(shown.policy)}`,
          `coverage: ${shown.coverage.mode}${shown.coverage.department_ids.length ? ` ${shown.coverage.department_ids.join(',')}` : ''}${shown.coverage.member_ids.length ? ` ${shown.coverage.member_ids.join(',')}` : ''}; members added later ${shown.coverage.inherit_future ? 'covered' : 'not covered'}`,
          ...shown.members.map((m) => `member ${m.member_id}: integrator UUID ${m.integrator_uuid ?? '(none)'}; overrides ${JSON.stringify(m.overrides)}`),
          `incoming numbers: ${shown.incoming_numbers.join(' ') || '(none)'}`,
          `live server keys: ${shown.live_server_keys}`,
        ].join('\n'),
      );
    });
  withPolicyOptions(
    integration
      .command('create')
      .requiredOption('--account <accountId>')
      .requiredOption('--name <name>')
      .option('--origin <origin...>', 'allowed origins')
      .option('--identifier-mode <email|uuid>', 'how backends name agents', choice('email', 'uuid'))
      .option('--window-mode <mode>', 'popup, tab, frame-shell or extension', choice<WindowMode>('popup', 'tab', 'frame-shell', 'extension')),
  ).action(async (o: PolicyFlags & { account: string; name: string; origin?: string[]; identifierMode?: 'email' | 'uuid'; windowMode?: WindowMode }) => {
    const { integration: created, serverKey } = await createIntegration(await deps(), {
      accountId: o.account,
      name: o.name,
      origins: o.origin,
      identifierMode: o.identifierMode,
      windowMode: o.windowMode,
      ...policyFromFlags(o),
    });
    out.result(
      { integration_id: created.id, server_key: serverKey },
      `integration ${created.id} created\nserver key (shown once, store it in your backend): ${serverKey}`,
    );
  });
  integration
    .command('origins <integrationId>')
    .description('replace the allowed origins; lines that are not origins are refused and nothing is saved')
    .option('--origin <origin...>', 'an allowed origin')
    .option('--file <file>', 'one origin per line ("-" for standard input)')
    .option('--none', 'allow no origin at all (every widget of the integration stops working)')
    .action(async (id: string, o: { origin?: string[]; file?: string; none?: boolean }) => {
      const given = o.origin !== undefined || o.file !== undefined;
      if (given === Boolean(o.none)) throw new InvalidArgumentError('give the new list (--origin, --file), or --none to remove every origin');
      const origins = originLines(o, files);
      // An empty file or standard input (a missing file piped in, a truncated one) is a mistake, not --none.
      if (given && parseOriginLines(origins).length === 0) throw new InvalidArgumentError('the list given holds no origin: nothing was saved (--none removes every origin)');
      const row = await setOrigins(await deps(), id, origins);
      out.result({ integration_id: id, allowed_origins: row.allowed_origins }, `allowed origins: ${row.allowed_origins.join(' ') || '(none)'}`);
    });
  integration
    .command('numbers <integrationId> [numbers...]')
    .description("replace the phone numbers whose incoming calls ring the integration's agents (Twilio: each number's voice URL is the incoming webhook, docs/twilio.md)")
    .option('--none', "take every number away (the incoming webhook then answers their calls 404: Twilio's fallback URL or error message)")
    .action(async (id: string, numbers: string[], o: { none?: boolean }) => {
      if ((numbers.length > 0) === Boolean(o.none)) throw new InvalidArgumentError('give the numbers (E.164, such as +12025550100), or --none to take them all away');
      const set = await setIncomingNumbers(await deps(), id, numbers);
      out.result({ integration_id: id, incoming_numbers: set }, `incoming numbers: ${set.join(' ') || '(none)'}`);
    });
  integration
    .command('allow-all <integrationId> <onOff>')
    .description("'Allow all origins (for testing)'")
    .action(async (id: string, value: string) => {
      const on = onOff(value);
      const row = await setAllowAllOrigins(await deps(), id, on);
      out.result(
        { integration_id: id, allow_all_origins: row.allow_all_origins, ...(row.allow_all_origins && { warning: allowAllWarning(id) }) },
        row.allow_all_origins ? `WARNING: ${allowAllWarning(id)}` : 'allow all origins: off',
      );
    });
  integration.command('identifier-mode <integrationId> <mode>').action(async (id: string, mode: string) => {
    const chosen = choice('email', 'uuid')(mode);
    await setIdentifierMode(await deps(), id, chosen);
    out.result({ integration_id: id, identifier_mode: mode }, `identifier mode: ${mode}`);
  });
  integration
    .command('widget <integrationId>')
    .description("the widget's defaults: its corner of the page and its language (init() options override them)")
    .option('--position <corner>', 'bottom-right, bottom-left, top-right or top-left', choice('bottom-right', 'bottom-left', 'top-right', 'top-left'))
    .option('--language <tag|page>', "en, fr… (the SDK speaks en and fr; another tag falls back to English); page: the page's <html lang>, the default")
    .action(async (id: string, o: { position?: WidgetDefaults['position']; language?: string }) => {
      const widget = await setWidgetDefaults(await deps(), id, { position: o.position, language: o.language });
      out.result({ integration_id: id, widget }, `widget defaults of ${id}: ${widget.position}, ${widget.language === PAGE_LANGUAGE ? "the page's language" : widget.language}`);
    });
  integration.command('window-mode <integrationId> <mode>').action(async (id: string, mode: string) => {
    const chosen = choice<WindowMode>('popup', 'tab', 'frame-shell', 'extension')(mode);
    await setWindowMode(await deps(), id, chosen);
    out.result({ integration_id: id, window_mode: mode }, `window mode: ${mode}`);
  });
  withPolicyOptions(integration.command('policy <integrationId>').description('policy defaults')).action(
    async (id: string, o: PolicyFlags) => {
      const row = await setPolicy(await deps(), id, policyFromFlags(o));
      out.result(row, `policy of ${id} updated`);
    },
  );
  integration
    .command('coverage <integrationId>')
    .requiredOption('--mode <everyone|members|departments>', 'who is covered', choice<CoverageMode>('everyone', 'members', 'departments'))
    .option('--members <ids>', 'selected member ids', list)
    .option('--departments <ids>', 'department ids', list)
    .option('--inherit-future <on|off>', 'whether members added later are covered (unchanged when not given; on for a new integration)', onOff)
    .action(async (id: string, o: { mode: CoverageMode; members?: string[]; departments?: string[]; inheritFuture?: boolean }) => {
      // A selection of nobody covers nobody: on the command line surely a forgotten list (to stop every agent, disable the integration).
      if (o.mode === 'members' && !o.members?.length) throw new InvalidArgumentError('--mode members needs the members (--members mem_…,mem_…)');
      if (o.mode === 'departments' && !o.departments?.length) throw new InvalidArgumentError('--mode departments needs the departments (--departments dep_…,dep_…)');
      await setCoverage(await deps(), id, { mode: o.mode, inheritFuture: o.inheritFuture, memberIds: o.members, departmentIds: o.departments });
      out.result(
        { integration_id: id, coverage: { mode: o.mode, member_ids: o.members ?? [], department_ids: o.departments ?? [], ...(o.inheritFuture === undefined ? {} : { inherit_future: o.inheritFuture }) } },
        `coverage of ${id}: ${o.mode}`,
      );
    });
  withMemberPolicyOptions(integration.command('override <integrationId> <memberId>').description('per-member overrides; "inherit" removes one (the integration\'s value applies again)'), true)
    .option('--caller-id <e164|inherit>', "this member's caller ID")
    .option('--calls <on|off|inherit>', 'calls enabled for this member', orInherit(onOff))
    .action(async (id: string, memberId: string, o: { [K in keyof PolicyFlags]: Inheritable<NonNullable<PolicyFlags[K]>> } & { calls?: Inheritable<boolean> }) => {
      if (o.callerId === 'none') throw new InvalidArgumentError('a member override sets a caller ID or inherits the integration\'s (--caller-id inherit); "none" is the integration policy\'s');
      const controls = overrideOf(o.controls);
      await setMemberOverrides(await deps(), id, memberId, {
        calls_enabled: overrideOf(o.calls),
        outbound: overrideOf(o.outbound),
        inbound: overrideOf(o.inbound),
        number_visibility: overrideOf(o.numbers),
        controls: controls ? policyFromFlags({ controls }).controls : controls,
        max_call_seconds: overrideOf(o.maxCallSeconds),
        caller_id: o.callerId === 'inherit' ? null : overrideOf(o.callerId),
      });
      out.result({ integration_id: id, member_id: memberId }, `overrides of ${memberId} updated`);
    });
  integration
    .command('map-uuid <integrationId> <memberId> <uuid>')
    .description("uuid mode: the integrator's UUID for a member (\"none\" removes it)")
    .action(async (id: string, memberId: string, uuid: string) => {
      const mapped = uuid === 'none' ? null : uuid;
      await mapIntegratorUuid(await deps(), id, memberId, mapped);
      out.result({ integration_id: id, member_id: memberId, integrator_uuid: mapped }, mapped ? `mapped ${mapped} to ${memberId}` : `${memberId} has no integrator UUID now`);
    });
  integration.command('rotate-key <integrationId>').action(async (id: string) => {
    const key = await rotateServerKey(await deps(), id);
    out.result({ integration_id: id, server_key: key }, `new server key (shown once; the old key no longer works): ${key}`);
  });
  integration.command('revoke-key <integrationId>').action(async (id: string) => {
    const n = await revokeServerKey(await deps(), id);
    out.result(
      { integration_id: id, revoked: n },
      n > 0 ? `server key revoked; the backend can no longer call the API` : `no live server key to revoke (already revoked); the backend cannot call the API`,
    );
  });
  for (const [name, enabled] of [['enable', true], ['disable', false]] as const) {
    integration.command(`${name} <integrationId>`).action(async (id: string) => {
      await setIntegrationEnabled(await deps(), id, enabled);
      out.result({ integration_id: id, enabled }, `integration ${id} ${name}d`);
    });
  }
  integration
    .command('close-windows <integrationId>')
    .description("close every call window of the integration (its agents open theirs again from the widget): after a leaked server key, the windows paired through it")
    .action(async (id: string) => {
      const closed = await closeIntegrationWindows(await deps(), id);
      out.result({ integration_id: id, closed }, `${closed} call windows of ${id} closed; a call on one ends with it (its window lets the voice leg go; else the reaper hangs it up once the window is silent 90 s)`);
    });
  integration
    .command('revoke <integrationId>')
    .description('revoke for good: keys stop, widget sessions and call windows end, calls end')
    .action(async (id: string) => {
      const result = await revokeIntegration(await services(), id);
      out.result(
        { integration_id: id, ...result },
        `integration ${id} revoked: ${result.sessions} widget sessions, ${result.engines} call windows and ${result.calls} calls ended` +
          (result.uncertain ? ` (${result.uncertain} calls could not be ended yet; the service keeps trying)` : ''),
      );
    });

  const platform = program.command('platform').description('the platform-wide switch');
  for (const [name, disabled] of [['disable', true], ['enable', false]] as const) {
    platform.command(name).action(async () => {
      await (await services()).platform.setDisabled(disabled);
      out.result({ disabled }, disabled ? 'platform disabled: every endpoint refuses' : 'platform enabled');
    });
  }
  platform.command('status').action(async () => {
    const disabled = await (await services('reading')).platform.isDisabled();
    out.result({ disabled }, disabled ? 'platform: disabled' : 'platform: enabled');
  });

  program
    .command('rate')
    .description('calling rates')
    .command('set <prefix> <perMinute>')
    .description('rate for numbers starting with prefix, in currency units per minute')
    .action(async (prefix: string, perMinute: string) => {
      const micros = money(perMinute);
      await setRate(await deps(), prefix, micros);
      out.result({ prefix, per_minute: amount(micros) }, `rate ${prefix}: ${amount(micros)}/min`);
    });
  const block = program.command('block').description('do-not-call list');
  block
    .command('add <number>')
    .option('--account <accountId>', 'only for this account (default: platform-wide)')
    .action(async (number: string, o: { account?: string }) => {
      await blockNumber(await deps(), o.account ?? null, number);
      out.result({ number, account_id: o.account ?? null }, `${number} is on the do-not-call list`);
    });
  block
    .command('remove <number>')
    .option('--account <accountId>', "from this account's list (default: the platform-wide one)")
    .action(async (number: string, o: { account?: string }) => {
      const removed = await unblockNumber(await deps(), o.account ?? null, number);
      if (!removed) throw new InvalidArgumentError(`${number} is not on the ${o.account ? `do-not-call list of ${o.account}` : 'platform-wide do-not-call list'}`);
      out.result({ number, account_id: o.account ?? null, removed }, `${number} is off the do-not-call list`);
    });

  program
    .command('call')
    .description('calls')
    .command('inbound')
    .description('simulated provider: ring a routable agent of the integration with an incoming call')
    .requiredOption('--integration <integrationId>')
    .requiredOption('--from <e164>', "the caller's number")
    .option('--agent <email>', "ring only this member's window")
    .option('--name <name>', 'caller name shown in the widget')
    .action(async (o: { integration: string; from: string; agent?: string; name?: string }) => {
      const call = await (await services('in-node')).calls.injectInbound({ integrationId: o.integration, from: o.from, memberEmail: o.agent, callerName: o.name });
      out.result(call, `incoming call ${call.call_id} from ${o.from} is ringing`);
    });

  return program;
}
