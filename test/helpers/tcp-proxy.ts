/**
 * A TCP proxy in front of a server (PostgreSQL), to stage a network partition between one node
 * and it: `cut()` drops the connections open through it and leaves new ones unanswered (accepted,
 * never carried through, as a network that drops packets leaves them), `mend()` carries them again.
 */
import { createServer, connect, type Socket } from 'node:net';

export interface TcpProxy {
  /** the port to connect to instead of the server's */
  port: number;
  cut(): void;
  mend(): void;
  close(): Promise<void>;
}

export async function tcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let cut = false;
  const open = new Set<Socket>();
  const server = createServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => {});
    if (cut) return; // held, unanswered
    const upstream = connect(target.port, target.host);
    open.add(upstream);
    upstream.on('close', () => {
      open.delete(upstream);
      client.destroy();
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    cut() {
      cut = true;
      for (const socket of open) socket.destroy();
    },
    mend() {
      cut = false;
      for (const socket of open) socket.destroy(); // the ones held while cut: their clients gave up on them
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
