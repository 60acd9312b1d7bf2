/**
 * Configuration from the environment, validated once at start. A bad value stops the process
 * with a message naming the variable, never a stack trace from deep inside a driver.
 */
import { z } from 'zod';
import { LIMITS } from '../shared/limits.js';
import { parseOrigin } from '../shared/origin.js';
import { trustOf, type TrustProxy } from './http/client-address.js';
import { PG_DEFAULTS } from './store/db.js';

/** Blank (an env file's `NAME=`) is unset, as an absent variable. */
const blankIsUnset = (value: unknown) => (typeof value === 'string' && value.trim() === '' ? undefined : value);

/**
 * A whole number in decimal digits, from `min` to `max`. Not Number()'s reading, which takes ' '
 * for 0, 0x20 for 32, 0b11 for 3 and 1e3 for 1000: a typo in a pool size or a retention period
 * (which deletes records) must not pass as another number.
 */
const digits = (min: number, max: number, message = `must be a whole number from ${min} to ${max}, in decimal digits`) => z.string().trim().regex(/^\d{1,16}$/, message).transform(Number).pipe(z.number().min(min, message).max(max, message));
/** ...unset or blank, `fallback` */
const integer = (min: number, max: number, fallback: number, message?: string) =>
  z.preprocess((value) => blankIsUnset(value) ?? String(fallback), digits(min, max, message));
/** ...unset or blank, unset */
const optionalInteger = (min: number, max: number) => z.preprocess(blankIsUnset, digits(min, max).optional());

/**
 * A port: 0 (any free port) to 65535, in decimal digits. Not Number()'s reading, which takes ' '
 * for 0 (a random port, which PUBLIC_BASE_URL's default would then name as :0), and 0x1F90 or
 * 1e3 for 8080 or 1000.
 */
const port = (fallback: number) => integer(0, 65535, fallback, 'must be a port number, 0 to 65535');
const flag = z
  .enum(['1', '0', 'true', 'false', 'yes', 'no', ''])
  .transform((value) => ['1', 'true', 'yes'].includes(value));
const publicOrigin = z.string().refine((value) => parseOrigin(value) !== null, {
  message: 'must be an origin such as https://c2c.example.com (scheme, host, optional port, no path)',
});
const urlWithScheme = (schemes: string[]) =>
  z.string().refine(
    (value) => {
      try {
        return schemes.includes(new URL(value).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a ${schemes.join(' or ')} URL` },
  );

/**
 * The longest time limit a variable may set: an hour. Node runs a timer of more than 2^31-1 ms
 * after 1 ms instead (with a warning), so "effectively never" would fail everything at once.
 */
const MAX_TIMEOUT_MS = 3_600_000;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

const EnvSchema = z.object({
  PORT: port(8080),
  GATEWAY_PORT: port(8081),
  DEMO_PORT: port(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  C2C_DATA_DIR: z.string().min(1).default('.data'),
  DATABASE_URL: urlWithScheme(['postgres:', 'postgresql:']).optional(),
  /** PostgreSQL cancels a statement running (or waiting on a lock) longer than this: the caller gets 503 */
  DATABASE_STATEMENT_TIMEOUT_MS: integer(100, MAX_TIMEOUT_MS, PG_DEFAULTS.statementTimeoutMs),
  /** waiting longer than this for a PostgreSQL connection fails with 503 */
  DATABASE_CONNECT_TIMEOUT_MS: integer(100, MAX_TIMEOUT_MS, PG_DEFAULTS.connectTimeoutMs),
  /** PostgreSQL connections a node holds at most (nodes × this must stay under the server's max_connections) */
  DATABASE_POOL_SIZE: integer(2, 1000, PG_DEFAULTS.poolSize),
  REDIS_URL: urlWithScheme(['redis:', 'rediss:']).optional(),
  PUBLIC_BASE_URL: publicOrigin.optional(),
  PUBLIC_SITE_URL: publicOrigin.optional(),
  PUBLIC_GATEWAY_URL: publicOrigin.optional(),
  C2C_DEMO: flag.default(false),
  /** the provider of real call windows; simulated windows (demos, tests) always use the simulator */
  VOICE_PROVIDER: z.enum(['simulated', 'twilio']).default('simulated'),
  /** whether POST /engine/pair takes `simulated: true` (integrators' CI); an operator refuses it where no fake call may be billed */
  SIMULATED_ENGINES: z.enum(['allow', 'refuse']).default('allow'),
  /** where the Twilio driver reaches Twilio's REST API (an egress proxy); https://api.twilio.com when unset */
  TWILIO_API_BASE_URL: z
    .string()
    .refine((value) => parseOrigin(value) !== null, {
      message: 'must be an origin such as https://egress.example:8443 (the REST paths are Twilio\'s; no path of its own)',
      abort: true,
    })
    .refine((value) => value.startsWith('https:') || LOOPBACK_HOSTS.has(new URL(value).hostname), {
      message: 'must be https (it is sent the account\'s credentials); http only on loopback',
    })
    .optional(),
  /** a Twilio REST request (a hangup) unanswered this long is given up: the hangup answers 502 hangup_uncertain */
  TWILIO_TIMEOUT_MS: integer(100, 60_000, 5000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  WIDGET_TOKEN_TTL_SECONDS: integer(5, 24 * 3600, LIMITS.widgetTokenTtlSeconds),
  /** off; `true` (every hop); or the proxies' addresses, CIDR ranges or names (loopback, linklocal, uniquelocal), comma-separated */
  TRUST_PROXY: z
    .string()
    .transform((value, ctx): TrustProxy => {
      const word = value.trim().toLowerCase();
      if (['', '0', 'false', 'no', 'off'].includes(word)) return false;
      if (['1', 'true', 'yes', 'on', 'all'].includes(word)) return true;
      if (/^\d+$/.test(word)) {
        // as fastify 5 does: a hop count cannot tell the proxy in front from a client posing as one
        ctx.addIssue({ code: 'custom', message: 'hop counts are not supported; list the proxies\' addresses or CIDR ranges' });
        return z.NEVER;
      }
      const proxies = value.split(',').map((entry) => entry.trim()).filter(Boolean);
      try {
        trustOf(proxies);
      } catch (error) {
        const why = (error as Error).message;
        ctx.addIssue({ code: 'custom', message: `${why}; must be off, true, or comma-separated proxy addresses, CIDR ranges or loopback/linklocal/uniquelocal` });
        return z.NEVER;
      }
      return proxies;
    })
    .default(false),
  /** delete widget command records older than this many days (api/domain/retention.ts); unset keeps them all */
  COMMAND_RETENTION_DAYS: optionalInteger(1, 36_500),
  /** delete call records ended longer ago than this many days (api/domain/retention.ts); unset keeps them all */
  CALL_RETENTION_DAYS: optionalInteger(1, 36_500),
  C2C_ALLOW_UWS_FALLBACK: flag.default(false),
  /** Chromium extension ids of this installation's extension (comma-separated) */
  C2C_EXTENSION_IDS: z
    .string()
    .regex(/^[a-p]{32}(,[a-p]{32})*$/, 'must be comma-separated Chromium extension ids (32 letters a–p)')
    .optional(),
  /** shed load (503 service_unavailable) when the event loop lags more than this; 0 = off */
  C2C_MAX_EVENT_LOOP_DELAY_MS: integer(0, MAX_TIMEOUT_MS, 0),
  /** benchmarks only: multiplies every rate limit */
  C2C_RATE_LIMIT_SCALE: z.preprocess(
    (value) => blankIsUnset(value) ?? '1',
    z.string().trim().regex(/^\d{1,9}(\.\d{1,9})?$/, 'must be a positive decimal number such as 10000 or 0.5').transform(Number).pipe(z.number().positive('must be a positive decimal number such as 10000 or 0.5')),
  ),
  /** sockets one credential may hold on a gateway node (benchmarks hold thousands on one token) */
  C2C_SOCKETS_PER_CREDENTIAL: integer(1, 1_000_000_000, LIMITS.socketsPerCredentialPerNode),
});

export interface Config {
  port: number;
  gatewayPort: number;
  demoPort: number;
  host: string;
  dataDir: string;
  databaseUrl: string | undefined;
  databaseStatementTimeoutMs: number;
  databaseConnectTimeoutMs: number;
  databasePoolSize: number;
  redisUrl: string | undefined;
  /** origin the API is reached at from outside; provider webhooks are signed against it */
  publicBaseUrl: string;
  /** {base_url} of the spec */
  apiBaseUrl: string;
  /** {site_url} of the spec: SDK script, call window, extension page */
  siteUrl: string;
  /** where socket.io-client connects */
  gatewayUrl: string;
  demo: boolean;
  voiceProvider: 'simulated' | 'twilio';
  /** SIMULATED_ENGINES: refuse pairs no simulated engine (docs/simulated-provider.md) */
  simulatedEngines: 'allow' | 'refuse';
  /** TWILIO_API_BASE_URL: undefined is Twilio's own */
  twilioApiBaseUrl: string | undefined;
  twilioTimeoutMs: number;
  logLevel: string;
  widgetTokenTtlSeconds: number;
  /** proxies trusted to name the client in X-Forwarded-For (http/client-address.ts) */
  trustProxy: TrustProxy;
  /** widget command records older than this are deleted; undefined keeps them all */
  commandRetentionDays: number | undefined;
  /** call records ended longer ago than this are deleted; undefined keeps them all */
  callRetentionDays: number | undefined;
  allowUwsFallback: boolean;
  /** chrome-extension://<id> origins allowed to run an engine */
  extensionOrigins: string[];
  /** whether PUBLIC_GATEWAY_URL was set: an API-only node then tells clients push is available */
  gatewayConfigured: boolean;
  rateLimitScale: number;
  /** sockets one credential may hold on a gateway node (gateway/limits.ts) */
  socketsPerCredential: number;
  maxEventLoopDelayMs: number;
}

export const API_PREFIX = '/api/v1/click2call';

/**
 * What the operator fixes in the environment: a bad variable, a server out of reach, a port taken.
 * `c2c` prints its message, one line naming the variable, without a stack (cli/main.ts).
 */
export class ConfigError extends Error {}

/** Reads and validates the environment; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = EnvSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const publicBaseUrl = parseOrigin(e.PUBLIC_BASE_URL ?? `http://127.0.0.1:${e.PORT}`)!;
  const config: Config = {
    port: e.PORT,
    gatewayPort: e.GATEWAY_PORT,
    demoPort: e.DEMO_PORT,
    host: e.HOST,
    dataDir: e.C2C_DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    redisUrl: e.REDIS_URL,
    publicBaseUrl,
    apiBaseUrl: `${publicBaseUrl}${API_PREFIX}`,
    siteUrl: parseOrigin(e.PUBLIC_SITE_URL ?? publicBaseUrl)!,
    gatewayUrl: parseOrigin(e.PUBLIC_GATEWAY_URL ?? `http://127.0.0.1:${e.GATEWAY_PORT}`)!,
    demo: e.C2C_DEMO,
    voiceProvider: e.VOICE_PROVIDER,
    simulatedEngines: e.SIMULATED_ENGINES,
    twilioApiBaseUrl: e.TWILIO_API_BASE_URL,
    twilioTimeoutMs: e.TWILIO_TIMEOUT_MS,
    logLevel: e.LOG_LEVEL,
    widgetTokenTtlSeconds: e.WIDGET_TOKEN_TTL_SECONDS,
    trustProxy: e.TRUST_PROXY,
    commandRetentionDays: e.COMMAND_RETENTION_DAYS,
    callRetentionDays: e.CALL_RETENTION_DAYS,
    allowUwsFallback: e.C2C_ALLOW_UWS_FALLBACK,
    extensionOrigins: (e.C2C_EXTENSION_IDS?.split(',') ?? []).map((id) => `chrome-extension://${id}`),
    gatewayConfigured: e.PUBLIC_GATEWAY_URL !== undefined,
    rateLimitScale: e.C2C_RATE_LIMIT_SCALE,
    socketsPerCredential: e.C2C_SOCKETS_PER_CREDENTIAL,
    maxEventLoopDelayMs: e.C2C_MAX_EVENT_LOOP_DELAY_MS,
  };
  const merged = { ...config, ...overrides };
  // With the simulated provider every call window is a simulated engine (window/src/main.ts): refusing them would refuse every window.
  if (merged.simulatedEngines === 'refuse' && merged.voiceProvider !== 'twilio') {
    throw new ConfigError('Invalid configuration:\n  SIMULATED_ENGINES: refuse needs VOICE_PROVIDER=twilio: with the simulated provider every call window pairs as a simulated engine');
  }
  return merged;
}

/**
 * A public service whose gateway address was left at its loopback default: browsers (elsewhere,
 * or on an https page that may not reach http) cannot reach it, and quietly fall back to polling,
 * so push never works and nothing says why. Said at start, with what to set.
 */
export function loopbackGatewayWarning(config: Pick<Config, 'publicBaseUrl' | 'gatewayConfigured' | 'gatewayUrl'>): string | null {
  if (config.gatewayConfigured) return null;
  if (LOOPBACK_HOSTS.has(new URL(config.publicBaseUrl).hostname)) return null;
  return `PUBLIC_BASE_URL (${config.publicBaseUrl}) is public but PUBLIC_GATEWAY_URL is not set: browsers are told to reach the gateway at ${config.gatewayUrl}, which they cannot, and will only poll. Set PUBLIC_GATEWAY_URL to where the proxy serves /socket.io.`;
}

/**
 * Twilio posts the voice webhook and status callbacks to PUBLIC_BASE_URL, and signs them over it:
 * left at its loopback default, Twilio reaches none, and every window's call is refused by Twilio.
 * Said at start, with what to set.
 */
export function loopbackWebhookWarning(config: Pick<Config, 'publicBaseUrl' | 'voiceProvider'>): string | null {
  if (config.voiceProvider !== 'twilio' || !LOOPBACK_HOSTS.has(new URL(config.publicBaseUrl).hostname)) return null;
  return `VOICE_PROVIDER is twilio but PUBLIC_BASE_URL (${config.publicBaseUrl}) is loopback: Twilio cannot reach the voice webhook or the status callbacks there, so no call goes through. Set PUBLIC_BASE_URL to the API's public origin.`;
}
