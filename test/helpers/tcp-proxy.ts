/**
 * A TCP proxy in front of a server (PostgreSQL), to stage a network partition between a node and
 * it: while `cut`, no byte passes either way (connections stay open, and new ones are accepted,
 * as a network that drops packets leaves them: nothing is answered, nothing is refused); bytes
 * sent meanwhile are lost, so a connection used across a cut is broken for good, as it would be.
 */
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';

export interface TcpProxy {
  /** the server's URL, with the proxy's address instead of the server's */
  url: string;
  cut: boolean;
  close(): Promise<void>;
}

export async function tcpProxy(serverUrl: string): Promise<TcpProxy> {
  const target = new URL(serverUrl);
  const links = new Set<Socket>();
  const proxy: TcpProxy = { url: '', cut: false, close };
  const server = createServer((inbound) => {
    const outbound = connect(Number(target.port || 5432), target.hostname);
    for (const link of [inbound, outbound]) {
      links.add(link);
      link.on('close', () => links.delete(link));
    }
    inbound.on('data', (bytes) => void (proxy.cut || outbound.write(bytes)));
    outbound.on('data', (bytes) => void (proxy.cut || inbound.write(bytes)));
    for (const [a, b] of [[inbound, outbound], [outbound, inbound]] as const) {
      a.on('error', () => b.destroy());
      a.on('close', () => b.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxied = new URL(serverUrl);
  proxied.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.url = proxied.toString();
  async function close(): Promise<void> {
    for (const link of links) link.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return proxy;
}
