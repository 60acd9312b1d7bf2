/**
 * The real-time gateway: a uWebSockets.js app with Socket.IO attached (io.attachApp), on
 * GATEWAY_PORT. The Socket.IO server is the bus's, so room events from any node reach this node's
 * sockets through the bus's adapter. It holds no business rules: sockets call the same domain
 * services as the REST routes.
 */
import type { Socket } from 'socket.io';
import type { HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { C2CError } from '../shared/errors.js';
import { checkStoreWritable } from '../api/store/db.js';
import { ConfigError } from '../api/config.js';
import { SOCKET_PATH, type SocketEnd } from '../shared/events.js';
import type { Services } from '../api/services.js';
import { keepCurrentThroughOutages } from './catch-up.js';
import { end, socketHandlers } from './connections.js';
import { gatewayCors } from './cors.js';
import { closeUnread, guardEvents, WS_MAX_BACKPRESSURE } from './guard.js';
import { EngineDrops } from './drops.js';
import { endExpiredTokens, watchEndings } from './endings.js';
import { handshake, releaseHandshake, type SocketData } from './handshake.js';
import { watchIsolation } from './isolation.js';
import { SocketLimits } from './limits.js';
import { LocalSockets } from './local-sockets.js';
import { loadUws } from './uws.js';

/** uWS's ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT (its typings name the option only for listen(port, options, cb)) */
const LISTEN_EXCLUSIVE_PORT = 1;
/** How long a stopping node waits for its sockets' requests under way (within the process's 12 s to exit). */
export const REQUESTS_SETTLE_MS = 1_000;

export interface Gateway {
  port: number;
  native: boolean;
  /** Tells every client to reconnect elsewhere (a retry reason), stops listening, and closes. */
  close(): Promise<void>;
}

/**
 * GET (and HEAD, as load balancers' checks ask) `path`: `body`'s text, or 503 with the error's
 * envelope. HEAD's answer is empty (Content-Length 0): uWS's endWithoutBody with a length leaves
 * the response unfinished, so the next request on a kept-alive connection went unanswered.
 */
function serveText(app: TemplatedApp, path: string, body: () => Promise<{ type: string; text: string }>): void {
  const serve = (withBody: boolean) => (res: HttpResponse) => {
    let aborted = false;
    res.onAborted(() => void (aborted = true));
    const end = (status: string, type: string, text: string) =>
      !aborted && res.cork(() => res.writeStatus(status).writeHeader('content-type', type).end(withBody ? text : ''));
    body()
      .then(
        ({ type, text }) => end('200 OK', type, text),
        (error: unknown) => end('503 Service Unavailable', 'application/json', JSON.stringify(error instanceof C2CError ? error.toJSON() : new C2CError('service_unavailable').toJSON())),
      )
      .catch(() => {}); // a connection gone meanwhile: nothing to answer, and nothing to crash for
  };
  app.get(path, serve(true));
  app.head(path, serve(false));
}

/**
 * Anything else on the gateway's port (Socket.IO's own path excepted, which uWS matches first: a
 * static route before a wildcard) is 404 in the envelope (empty for HEAD), not a connection closed
 * without an answer, which a proxy's check of `/` would take for a dead node.
 */
function notFound(app: TemplatedApp): void {
  const text = JSON.stringify(new C2CError('not_found', 'The gateway serves Socket.IO (/socket.io/), /healthz and /metrics.').toJSON());
  app.any('/*', (res, req) => {
    const head = req.getMethod() === 'head';
    res.cork(() => res.writeStatus('404 Not Found').writeHeader('content-type', 'application/json').end(head ? '' : text));
  });
}

/** Listens on the port alone: uWS otherwise listens with SO_REUSEPORT. */
function listenExclusively(app: TemplatedApp, options: { port: number; host: string }): Promise<us_listen_socket> {
  return new Promise<us_listen_socket>((resolve, reject) => {
    // A second node started on a taken port would otherwise start without a word and take half of
    // the new connections. Exclusive, it fails to start instead, before anything is wired to the
    // shared Socket.IO server.
    const listen = app.listen.bind(app) as unknown as (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => void;
    listen(options.host, options.port, LISTEN_EXCLUSIVE_PORT, (socket) =>
      socket
        ? resolve(socket)
        : reject(new ConfigError(`the gateway cannot listen on ${options.host}:${options.port} (HOST, GATEWAY_PORT): the port is taken, or HOST is not an address of this machine`)),
    );
  });
}

export async function startGateway(services: Services, options: { port: number; host: string }): Promise<Gateway> {
  const { uws, native } = loadUws(services.config.allowUwsFallback);
  const app = uws.App();
  const listenSocket = await listenExclusively(app, options);
  // Wired in this same turn of the event loop as the listen completed, so no connection arrives before it.
  let wired: () => Promise<void>;
  try {
    wired = wire(services, app, native);
  } catch (error) {
    // The process exits on this. The port at least is given back to an embedder (a test) that goes
    // on; what wiring did on the shared Socket.IO server before it threw is not undone.
    uws.us_listen_socket_close(listenSocket);
    throw error;
  }
  let closing: Promise<void> | undefined;
  return {
    port: uws.us_socket_local_port(listenSocket),
    native,
    close() {
      closing ??= (async () => {
        uws.us_listen_socket_close(listenSocket);
        await wired();
      })();
      return closing;
    },
  };
}

/**
 * Attaches Socket.IO and the gateway's routes to the app; returns what tells every socket to
 * reconnect elsewhere and stops the node's timers (once a catch-up under way is done).
 */
function wire(services: Services, app: TemplatedApp, native: boolean): () => Promise<void> {
  const io = services.bus.io;
  // Browsers on integrators' pages use long-polling when WebSockets are blocked: CORS (cors.ts).
  const cors = gatewayCors(services);
  app.options(`${SOCKET_PATH}/`, cors.preflight);
  // engine.io's uWS server takes maxBackpressure (its UServerOptions), which Socket.IO's typing of attachApp leaves out.
  const engineOptions = { path: SOCKET_PATH, allowRequest: cors.allowRequest, maxBackpressure: WS_MAX_BACKPRESSURE };
  io.attachApp(app, engineOptions);
  io.engine.on('headers', cors.headers);
  const limits = new SocketLimits(services);
  const local = new LocalSockets();
  const isolation = watchIsolation(services, io);
  io.use(handshake(services, limits, local, isolation));
  const handle = socketHandlers(services, limits);
  const guard = guardEvents(services.metrics);
  const drops = new EngineDrops(services, local);
  // One listener for every socket's disconnect (Socket.IO calls it with the socket as `this`).
  function disconnected(this: Socket, reason: string): void {
    // A client leaving the namespace but not the connection would hold it unseen (no socket to
    // count, end or sweep), for as long as it answers pings: we use one namespace, so it goes too.
    if (reason === 'client namespace disconnect') this.conn.close();
    local.remove(this);
    drops.dropped(this, reason);
    const data = this.data as SocketData;
    if (data.kind === 'engine') limits.engineLeft(data.engineId);
    services.metrics.sockets.dec({ kind: (this.data as SocketData).kind });
  }
  const restarting: SocketEnd = { code: 'server_restarting', final: false, message: 'This node is restarting; reconnect (another node will answer).' };
  let closing = false;
  io.on('connection', (socket) => {
    // A handshake being checked when the node began to close connects after the node told its
    // sockets to go and stopped the watchers that would end it: it is told now, as they were.
    if (closing) {
      releaseHandshake(socket);
      end(socket, restarting);
      return;
    }
    // Socket.IO puts every socket in a room named by its id. Nothing here is sent that way (pushes go
    // to agent and engine rooms, answers to the socket itself), and the room costs some 200 bytes of
    // adapter entries per socket.
    void socket.leave(socket.id);
    releaseHandshake(socket);
    services.metrics.sockets.inc({ kind: (socket.data as SocketData).kind });
    local.add(socket);
    socket.on('disconnect', disconnected);
    socket.onAny(guard);
    handle(socket);
  });
  const stopEndings = watchEndings(services, io, local);
  const stopExpiry = endExpiredTokens(services, io);
  const stopCatchUp = keepCurrentThroughOutages(services, io);
  const stopUnread = closeUnread(io, services.clock, services.metrics);

  // As the API's: a gateway whose store does not answer can neither take sockets nor serve their requests.
  serveText(app, '/healthz', async () => {
    // A stopping node is not one to send clients to, also on connections kept alive from before.
    if (closing) throw new C2CError('service_unavailable', 'This node is stopping.');
    await checkStoreWritable(services.db);
    return { type: 'application/json', text: JSON.stringify({ ok: true, role: 'gateway', native, store: services.db.driver, bus: services.bus.state() }) };
  });
  serveText(app, '/metrics', async () => ({ type: services.metrics.registry.contentType, text: await services.metrics.registry.metrics() }));
  notFound(app);

  return async () => {
    closing = true;
    stopEndings();
    stopExpiry();
    stopUnread();
    isolation.stop();
    drops.stop();
    const caughtUp = stopCatchUp();
    // The requests its sockets made finish, are answered, and announce what they changed before
    // the bus closes (a second at most). Only then are the sockets told to go: a socket ended
    // first drops every answer written after it (Socket.IO writes nothing to a closing
    // connection), and its client would send again elsewhere what was done here.
    await handle.settled(REQUESTS_SETTLE_MS);
    for (const socket of io.of('/').sockets.values()) end(socket, restarting);
    // A catch-up under way finishes before the store closes (a second at most: catch-up.ts).
    await caughtUp;
  };
}
