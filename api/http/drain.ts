/**
 * Stopping an HTTP listener without cutting what it is doing: it stops taking connections, the
 * requests in flight have up to `ms` to finish, then whatever is left is cut. Closing only closes
 * the connections idle at that moment; one whose request finishes later stays open for its next
 * request (keep-alive) and would hold the close up, so it is closed once idle.
 */
import type { Server } from 'node:http';

export async function drainServer(server: Server, ms: number, close: () => Promise<void>): Promise<void> {
  const idle = setInterval(() => server.closeIdleConnections(), 50);
  const cut = setTimeout(() => server.closeAllConnections(), ms);
  try {
    await close();
  } finally {
    clearInterval(idle);
    clearTimeout(cut);
  }
}
