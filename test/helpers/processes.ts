/** Real processes for multi-node suites: service nodes (`c2c serve --role …`) and a private Redis. */
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', '..', 'bin', 'c2c.js');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
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
export function spawnRedis(port: number): { stop(): Promise<void>; start(): Promise<void>; pause(): void; resume(): void } {
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
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
