/**
 * The admin bridge: while a server runs, `c2c` operator commands run inside it instead of opening
 * the store a second time (an embedded PGlite directory must have one owner), and their effects
 * reach the server's caches at once. The server writes <C2C_DATA_DIR>/admin.json (mode 0600) with
 * the URL this machine reaches it at and a random token; only callers on this machine holding that
 * token are served.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { C2CError } from '../../shared/errors.js';
import { sha256, secretMatches } from '../domain/credentials.js';
import type { Services } from '../services.js';
import { Output } from './output.js';
import { buildProgram } from './program.js';

export const ADMIN_PATH = '/admin/v1/cli';

interface AdminFile {
  url: string;
  token: string;
  pid: number;
}

export interface CliResult {
  code: number;
  stdout: string[];
  stderr: string[];
}

/** Runs one c2c command line against services; never throws. */
export async function runCommand(argv: string[], services: () => Promise<Services>): Promise<CliResult> {
  const out = new Output(argv.includes('--json'));
  const program = buildProgram(services, out);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return { code: 0, stdout: out.lines, stderr: out.errors };
  } catch (error) {
    const e = error as { code?: string; exitCode?: number; message?: string };
    if (e.code?.startsWith('commander.')) {
      const help = e.code === 'commander.helpDisplayed' || e.code === 'commander.help' || e.code === 'commander.version';
      // Commander writes its own parse errors; one a command's action threw (a bad amount) it does not.
      if (!help && out.errors.length === 0) out.error(e.message ?? String(error));
      return { code: help ? 0 : (e.exitCode ?? 1), stdout: out.lines, stderr: out.errors };
    }
    out.error(e.message ?? String(error));
    return { code: 1, stdout: out.lines, stderr: out.errors };
  }
}

/**
 * Whether the connection itself comes from this machine: its peer, never a forwarded address
 * (TRUST_PROXY), which a client can write. On loopback, or (an API listening on one interface's
 * address, HOST) from that same address: a connection from elsewhere cannot complete its
 * handshake with our own address as its source.
 */
function fromThisMachine(socket: { remoteAddress?: string | undefined; localAddress?: string | undefined }): boolean {
  const peer = socket.remoteAddress;
  return peer === '127.0.0.1' || peer === '::1' || peer === '::ffff:127.0.0.1' || (peer !== undefined && peer === socket.localAddress);
}

/**
 * Registers the bridge route (before listen); the returned function writes admin.json once the
 * listening URL is known, and returns the cleanup for shutdown.
 */
export function registerAdminBridge(app: FastifyInstance, services: Services): (listenUrl: string) => () => void {
  const token = randomBytes(24).toString('hex');
  const tokenHash = sha256(token);
  app.post(ADMIN_PATH, { schema: { hide: true } }, async (request) => {
    const presented = (request.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    const body = request.body as { argv?: unknown } | undefined;
    if (!fromThisMachine(request.socket) || !secretMatches(tokenHash, { lookup: '', secretHash: sha256(presented) })) {
      throw new C2CError('unauthorized', 'The admin bridge serves local operators holding admin.json only.');
    }
    if (!Array.isArray(body?.argv) || !body.argv.every((a) => typeof a === 'string')) {
      throw new C2CError('invalid_request', 'argv must be an array of strings.');
    }
    return runCommand(body.argv as string[], async () => services);
  });
  return (listenUrl) => {
    const file = join(services.config.dataDir, 'admin.json');
    mkdirSync(services.config.dataDir, { recursive: true });
    writeFileSync(file, JSON.stringify({ url: listenUrl, token, pid: process.pid } satisfies AdminFile), { mode: 0o600 });
    return () => rmSync(file, { force: true });
  };
}

/** The running server for this data directory, if any. */
export function findRunningServer(dataDir: string): AdminFile | undefined {
  const file = join(dataDir, 'admin.json');
  if (!existsSync(file)) return undefined;
  try {
    const admin = JSON.parse(readFileSync(file, 'utf8')) as AdminFile;
    process.kill(admin.pid, 0);
    return admin;
  } catch {
    return undefined;
  }
}

export async function forwardCommand(admin: AdminFile, argv: string[]): Promise<CliResult> {
  const response = await fetch(admin.url + ADMIN_PATH, {
    method: 'POST',
    headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ argv }),
  });
  if (!response.ok) throw new Error(`the running server refused the command (${response.status})`);
  return (await response.json()) as CliResult;
}
