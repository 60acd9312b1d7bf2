/**
 * The real-time gateway: a uWebSockets.js app with Socket.IO attached (io.attachApp), on
 * GATEWAY_PORT. The Socket.IO server is the bus's, so room events from any node reach this node's
 * sockets through the bus's adapter. It holds no business rules: sockets call the same domain
 * services as the REST routes.
 */
import type { ServerOptions } from 'socket.io';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { SOCKET_PATH } from '../shared/events.js';
import { createOriginPolicy } from '../api/http/cors.js';
import type { Services } from '../api/services.js';
import { end, onConnection } from './connections.js';
import { watchEndings, watchExpiry } from './endings.js';
import { engineOriginAllowed, handshake } from './handshake.js';
import { LocalSockets } from './local-sockets.js';
import { loadUws } from './uws.js';

/** Socket.IO's per-request CORS options (the `cors` package's options delegate). */
type CorsDelegate = Extract<NonNullable<ServerOptions['cors']>, (...args: never[]) => unknown>;

export interface Gateway {
  port: number;
  native: boolean;
  /** Tells every client to reconnect elsewhere (a retry reason), stops listening, and closes. */
  close(): Promise<void>;
}

function serveText(app: TemplatedApp, path: string, body: () => Promise<{ type: string; text: string }>): void {
  app.get(path, (res) => {
    let aborted = false;
    res.onAborted(() => void (aborted = true));
    body().then(
      ({ type, text }) => !aborted && res.cork(() => res.writeHeader('content-type', type).end(text)),
      () => !aborted && res.cork(() => res.writeStatus('503 Service Unavailable').end()),
    );
  });
}

export async function startGateway(services: Services, options: { port: number; host: string }): Promise<Gateway> {
  const { uws, native } = loadUws(services.config.allowUwsFallback);
  const app = uws.App();
  const io = services.bus.io;
  const widgetOrigins = createOriginPolicy(services);
  /** Whether a long-polling request from this Origin gets CORS headers: REST's rules. */
  const pollingAllowed = async (origin: string | undefined): Promise<boolean> =>
    !origin || engineOriginAllowed(services, origin) || (await widgetOrigins(origin).catch(() => false));
  io.attachApp(app, {
    path: SOCKET_PATH,
    // Browsers on integrators' pages use long-polling when WebSockets are blocked: CORS follows
    // REST's rules. engine.io writes to the request after its middlewares without checking whether
    // the client has gone, and uWS throws on a response that was aborted — unhandled, that stops
    // the process. So a WebSocket upgrade gets no CORS answer at all, at once (browsers do not
    // apply CORS to WebSockets; the handshake checks each token's origin), and a polling request
    // whose client hung up while its Origin was checked against the store is never answered.
    cors: ((req, callback) => {
      if (String(req.headers.upgrade).toLowerCase() === 'websocket') return callback(null, { origin: false });
      const origin = req.headers.origin;
      void pollingAllowed(origin).then((allowed) => {
        if ((req as { res?: { isAborted?: boolean } }).res?.isAborted) return;
        callback(null, { origin: allowed && origin ? origin : false });
      });
    }) satisfies CorsDelegate,
  });
  io.use(handshake(services));
  const connected = onConnection(services);
  const local = new LocalSockets();
  io.on('connection', (socket) => {
    local.add(socket);
    connected(socket);
    watchExpiry(services, socket);
  });
  const stopEndings = watchEndings(services, io, local);

  serveText(app, '/healthz', async () => ({ type: 'application/json', text: JSON.stringify({ ok: true, role: 'gateway', native, bus: services.bus.state() }) }));
  serveText(app, '/metrics', async () => ({ type: services.metrics.registry.contentType, text: await services.metrics.registry.metrics() }));

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(options.host, options.port, (socket) => (socket ? resolve(socket) : reject(new Error(`the gateway cannot listen on ${options.host}:${options.port}`))));
  });
  const port = uws.us_socket_local_port(listenSocket);

  let closing: Promise<void> | undefined;
  return {
    port,
    native,
    close() {
      closing ??= (async () => {
        stopEndings();
        uws.us_listen_socket_close(listenSocket);
        for (const socket of io.of('/').sockets.values()) {
          end(socket, { code: 'server_restarting', final: false, message: 'This node is restarting; reconnect (another node will answer).' });
        }
      })();
      return closing;
    },
  };
}
