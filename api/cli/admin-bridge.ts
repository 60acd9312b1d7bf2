/**
 * The admin bridge: while a server runs, `c2c` operator commands run inside it instead of opening
 * the store a second time (an embedded PGlite directory must have one owner), and their effects
 * reach the server's caches at once. The bridge is a listener of its own on loopback, on a port
 * the system picks, never a route of the public API: a reverse proxy on the same machine (where
 * TLS usually ends) forwards to the API from loopback, and would have put the bridge on the
 * internet behind its token alone. The server writes <C2C_DATA_DIR>/admin.json (mode 0600) with
 * the bridge's URL and a random token; only callers holding that token are served.
 *
 * Files a command names (`--file`) are read by the `c2c` process the operator runs, in its own
 * directory and with its own rights, and travel with the command (cli/files.ts): the server never
 * reads a path it is sent (its own standard input would block its event loop; a relative path
 * would be its own directory's file).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, readFileSync, mkdirSync } from 'node:fs';
import { removePrivateFileIf, writePrivateFile } from '../private-file.js';
import { join } from 'node:path';
import { C2CError } from '../../shared/errors.js';
import { sha256, secretMatches } from '../domain/credentials.js';
import { drainServer } from '../http/drain.js';
import { startOf } from '../store/data-dir-lock.js';
import type { Services } from '../services.js';
import type { AttachedFiles } from './files.js';
import { InvalidArgumentError } from 'commander';
import { ConfigError } from '../config.js';
import { OperatorError } from '../domain/operator/accounts.js';
import { Output } from './output.js';
import { buildProgram, type ServicesProvider } from './program.js';

export const ADMIN_PATH = '/admin/v1/cli';
/** A command line and the files it names: far below this. */
export const ADMIN_BODY_LIMIT = 1024 * 1024;
/** A caller that does not send its request within this is dropped (the bridge is one process's, not a queue). */
const ADMIN_REQUEST_TIMEOUT_MS = 30_000;

interface AdminFile {
  url: string;
  token: string;
  pid: number;
  /** the server process's start time (data-dir-lock.ts `startOf`): its pid alone may be another process's since (PID 1 in a container) */
  start?: string | null;
}

export interface CliResult {
  code: number;
  stdout: string[];
  stderr: string[];
}

export interface AdminBridge {
  /** where this machine reaches it (admin.json's url) */
  url: string;
  /** removes admin.json, stops taking commands, and lets those running finish for up to `drainMs` */
  close(drainMs?: number): Promise<void>;
}

/** Runs one c2c command line against services; never throws. */
export async function runCommand(argv: string[], services: ServicesProvider, files: AttachedFiles = {}): Promise<CliResult> {
  const out = new Output(argv.includes('--json'));
  let changedUnheard = false;
  /** the command opened the services to change something (not only to read) */
  let changing = false;
  const program = buildProgram(
    async (use) => {
      changing ||= use !== 'reading';
      const opened = await services(use);
      // (a simulated incoming call, in-node, changes no setting a node caches)
      changedUnheard ||= use === undefined && opened.bus.driver === 'redis' && opened.bus.state() !== 'up';
      return opened;
    },
    out,
    files,
  );
  try {
    await program.parseAsync(argv, { from: 'user' });
    if (changedUnheard) out.warn(UNHEARD_CHANGE);
    return { code: 0, stdout: out.lines, stderr: out.errors };
  } catch (error) {
    const e = error as { code?: string; exitCode?: number; message?: string };
    if (e.code?.startsWith('commander.')) {
      // Help that was asked for succeeds; help shown for a command left incomplete (`c2c platform`) does not.
      const asked = argv.some((arg) => ['--help', '-h', '--version', '-V', 'help'].includes(arg));
      const help = (e.code === 'commander.helpDisplayed' || e.code === 'commander.help' || e.code === 'commander.version') && asked;
      // Commander writes its own parse errors; one a command's action threw (a bad amount) it does not.
      if (!help && out.errors.length === 0) out.error(e.message ?? String(error));
      return { code: help ? 0 : (e.exitCode ?? 1), stdout: out.lines, stderr: out.errors };
    }
    // a refusal (an operator step's, a value's, the environment's, the service's own) says its code; anything else is a failure
    const refused = error instanceof OperatorError || error instanceof InvalidArgumentError || error instanceof ConfigError;
    const code = error instanceof C2CError ? error.code : refused ? 'invalid_request' : 'internal_error';
    // The store failing mid-change (its answer to a COMMIT lost, say) may have kept the change: the
    // operator must look before running the step again, as after a lost answer of the bridge.
    if (code === 'service_unavailable' && changing) {
      out.error(`the store failed during the command (${e.message ?? String(error)}): it may or may not have run. ${CHECK_FIRST}`, 'outcome_unknown');
      return { code: OUTCOME_UNKNOWN, stdout: out.lines, stderr: out.errors };
    }
    out.error(e.message ?? String(error), code);
    return { code: 1, stdout: out.lines, stderr: out.errors };
  }
}

/**
 * A change made through a node that cannot reach Redis is stored, and nodes that cannot reach it
 * either read the store (their caches are bypassed); nodes that can hear of it through the store
 * instead of the bus, up to poll_ms later (api/domain/push-debt.ts). The operator is told: this
 * node is cut off from the others.
 */
export const UNHEARD_CHANGE =
  'this node cannot reach Redis: the change is stored, and nodes that can reach Redis learn of it through the store within a few seconds rather than at once. ' +
  'Check the network between this node and Redis.';

/** Serves the bridge on loopback and writes admin.json; close() undoes both. */
export async function startAdminBridge(services: Services): Promise<AdminBridge> {
  const token = randomBytes(24).toString('hex');
  const tokenHash = sha256(token);
  // the commands running: a stop lets them finish (a revoke half done would leave the operator unsure)
  const running = new Set<Promise<void>>();
  const server = createServer({ requestTimeout: ADMIN_REQUEST_TIMEOUT_MS }, (request, response) => {
    const answered = serve(request, tokenHash, services).then(
      ({ status, body }) => reply(response, status, body),
      (error: unknown) => reply(response, ...refusal(error)),
    );
    running.add(answered);
    void answered.finally(() => running.delete(answered));
  });
  const url = await listenOnLoopback(server);
  const file = join(services.config.dataDir, 'admin.json');
  const close = (drainMs = 0) => drainServer(server, drainMs, () => new Promise<void>((resolve) => server.close(() => resolve())));
  try {
    mkdirSync(services.config.dataDir, { recursive: true });
    writePrivateFile(file, JSON.stringify({ url, token, pid: process.pid, start: startOf(process.pid) } satisfies AdminFile));
  } catch (error) {
    await close();
    // the operator's to fix, in one line (not the loopback listener's failure, which startNode names)
    throw new ConfigError(`C2C_DATA_DIR (${services.config.dataDir}) cannot hold admin.json: ${(error as Error).message}`, { cause: error });
  }
  return {
    url,
    close: async (drainMs = 0) => {
      const until = Date.now() + drainMs;
      removePrivateFileIf(file, (text) => text.includes(token));
      await close(drainMs);
      // a command whose caller went away (its connection cut) may still run: the store closes after it, within the same drain
      const left = Math.max(0, until - Date.now());
      await Promise.race([Promise.allSettled([...running]), new Promise((resolve) => setTimeout(resolve, left).unref())]);
    },
  };
}

/** IPv4 loopback, or IPv6 loopback on a machine without it. */
async function listenOnLoopback(server: Server): Promise<string> {
  for (const host of ['127.0.0.1', '::1']) {
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      const { address, port } = server.address() as AddressInfo;
      return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
    } catch (error) {
      if (host === '::1') throw error;
    }
  }
  throw new Error('unreachable');
}

async function serve(request: IncomingMessage, tokenHash: Uint8Array, services: Services): Promise<{ status: number; body: unknown }> {
  if (request.method !== 'POST' || request.url !== ADMIN_PATH) throw new C2CError('not_found', `The admin bridge serves POST ${ADMIN_PATH} only.`);
  const presented = (request.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
  if (!secretMatches(tokenHash, { lookup: '', secretHash: sha256(presented) })) {
    throw new C2CError('unauthorized', 'The admin bridge serves local operators holding admin.json only.');
  }
  const body = parse(await readBody(request)) as { argv?: unknown; files?: unknown } | null;
  if (!Array.isArray(body?.argv) || !body.argv.every((a) => typeof a === 'string')) {
    throw new C2CError('invalid_request', 'argv must be an array of strings.');
  }
  const files = body.files ?? {};
  if (typeof files !== 'object' || files === null || Array.isArray(files) || !Object.values(files).every((v) => typeof v === 'string')) {
    throw new C2CError('invalid_request', 'files must map each --file argument to its text.');
  }
  return { status: 200, body: await runCommand(body.argv as string[], async () => services, files as AttachedFiles) };
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > ADMIN_BODY_LIMIT) throw new C2CError('invalid_request', `The body is too large: a command is at most ${ADMIN_BODY_LIMIT} bytes, its files included.`, { status: 413 });
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new C2CError('invalid_request', 'The body must be JSON: {argv, files}.');
  }
}

function refusal(error: unknown): [number, unknown] {
  const known = error instanceof C2CError ? error : new C2CError('internal_error');
  return [known.status, known.toJSON()];
}

function reply(response: ServerResponse, status: number, body: unknown): void {
  if (response.headersSent) return;
  // a refused body is not read on: the connection goes with the answer
  if (status !== 200) response.setHeader('connection', 'close');
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** The exit code of a command that may have run without its outcome known (its answer lost, the store failing mid-step): a top-up run again would credit twice. */
export const OUTCOME_UNKNOWN = 3;

/** What the operator is told to do when a command's outcome is not known. */
export const CHECK_FIRST = 'Check before running it again (account show, integration list, department list, member list).';

/** The bridge answered and refused the command: it did not run. */
export class BridgeRefused extends Error {}

/** The running server for this data directory, if any. */
export function findRunningServer(dataDir: string): AdminFile | undefined {
  const file = join(dataDir, 'admin.json');
  if (!existsSync(file)) return undefined;
  try {
    const admin = JSON.parse(readFileSync(file, 'utf8')) as AdminFile;
    process.kill(admin.pid, 0);
    // left by a server that died, its pid another process's since: no server runs
    if (typeof admin.start === 'string' && startOf(admin.pid) !== admin.start) return undefined;
    return admin;
  } catch {
    return undefined;
  }
}

export async function forwardCommand(admin: AdminFile, argv: string[], files: AttachedFiles = {}): Promise<CliResult> {
  const response = await fetch(admin.url + ADMIN_PATH, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ argv, files }),
  });
  if (!response.ok) {
    const refused = (await response.json().catch(() => null)) as { message?: string } | null;
    throw new BridgeRefused(`the running server refused the command (${response.status}${refused?.message ? `: ${refused.message}` : ''})`);
  }
  return (await response.json()) as CliResult;
}
