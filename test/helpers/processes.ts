/** Real processes for multi-node suites: service nodes (`c2c serve --role …`) and a private Redis. */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'c2c.js');

/**
 * The kernel's ephemeral ports (Linux), from which it picks the local port of every outgoing
 * connection and of every listen(0): a port we hand out for a server to listen on later is taken
 * from below them, so that the many connections the suites open (to PostgreSQL, Redis, their own
 * servers) cannot take it meanwhile. Elsewhere (a laptop), the range is unknown: undefined.
 */
function ephemeralPorts(): { low: number } | undefined {
  try {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return low && low > 20_000 ? { low } : undefined;
  } catch {
    return undefined;
  }
}
const EPHEMERAL = ephemeralPorts();

/** Whether a server can listen on the port now (then closed again), or, for 0, the port the kernel gave it. */
function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const { port: bound } = server.address() as { port: number };
      server.close(() => resolve(bound));
    });
  });
}

/**
 * A port for a server that must know it before it listens (it is in its own configuration, or
 * given to a child process). Between this answer and that listen, anything may take the port; on
 * Linux the pick comes from below the ephemeral range (10000 up to it), where only another such
 * pick can, at random.
 */
export async function freePort(): Promise<number> {
  if (EPHEMERAL) {
    for (let attempt = 0; attempt < 50; attempt += 1) {
      const port = 10_000 + Math.floor(Math.random() * (EPHEMERAL.low - 10_000));
      if ((await tryListen(port)) !== undefined) return port;
    }
  }
  const port = await tryListen(0);
  if (port === undefined) throw new Error('no free port');
  return port;
}

export async function waitFor<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 30_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch {
      // not yet
    }
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export interface NodeProcess {
  name: string;
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function spawnNode(name: string, args: string[], env: Record<string, string>): NodeProcess {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    name,
    child,
    output,
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

export async function healthy(url: string): Promise<unknown> {
  return waitFor(async () => {
    const response = await fetch(url);
    return response.ok ? response.json() : undefined;
  }, url);
}

/**
 * A Redis server of our own, so a suite can stop and restart it without touching anyone else's.
 * stop() kills it (connections drop); pause() freezes it (SIGSTOP: connections stay up, commands
 * wait unanswered) until resume().
 */
export function spawnRedis(port: number, extraArgs: string[] = []): { stop(): Promise<void>; start(): Promise<void>; pause(): void; resume(): void } {
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extraArgs], { stdio: 'ignore' });
    await waitFor(
      () =>
        new Promise<true | undefined>((resolve) => {
          const socket = connect(port, '127.0.0.1');
          socket.on('connect', () => {
            socket.destroy();
            resolve(true);
          });
          socket.on('error', () => resolve(undefined));
        }),
      `redis on ${port}`,
    );
  };
  return {
    start,
    pause: () => void child?.kill('SIGSTOP'),
    resume: () => void child?.kill('SIGCONT'),
    async stop() {
      if (!child) return;
      const done = new Promise((resolve) => child!.on('exit', resolve));
      child.kill('SIGKILL');
      await done;
      child = undefined;
    },
  };
}
