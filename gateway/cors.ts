/**
 * CORS for the gateway's requests (REST's origin rules), answered without waiting on the store
 * whenever possible. engine.io runs CORS before it reads a long-polling POST's body and before it
 * answers: a check that waits on the store loses the body (uWS drops what arrives before the
 * handler reads it) and lets engine.io write to requests whose client hung up meanwhile (uWS
 * throws, and unhandled that stops the process). So:
 * - a WebSocket upgrade gets no CORS answer at all: browsers do not apply CORS to WebSockets, and
 *   the handshake checks each token's origin;
 * - each Origin's last answer is given at once and refreshed in the background through the REST
 *   policy, which the bus keeps current (an Origin just removed from an integration gets one more
 *   stale answer; CORS is not what guards a token);
 * - only an Origin this node has not seen waits: its first request is a handshake GET, which has
 *   no body, and if its client hangs up meanwhile it is never answered.
 */
import type { ServerOptions } from 'socket.io';
import { createOriginPolicy } from '../api/http/cors.js';
import type { Services } from '../api/services.js';
import { engineOriginAllowed } from './handshake.js';

/** Socket.IO's per-request CORS options (the `cors` package's options delegate). */
type CorsDelegate = Extract<NonNullable<ServerOptions['cors']>, (...args: never[]) => unknown>;

/** How many Origins' answers a node keeps (past that it starts again). */
const MAX_ORIGINS = 10_000;

export function gatewayCors(services: Services): CorsDelegate {
  const widgetOrigins = createOriginPolicy(services);
  const answers = new Map<string, boolean>();
  const check = async (origin: string): Promise<boolean> => {
    const allowed = engineOriginAllowed(services, origin) || (await widgetOrigins(origin).catch(() => false));
    if (answers.size >= MAX_ORIGINS) answers.clear();
    answers.set(origin, allowed);
    return allowed;
  };
  return (req, callback) => {
    const origin = req.headers.origin;
    if (String(req.headers.upgrade).toLowerCase() === 'websocket' || !origin) return callback(null, { origin: false });
    const known = answers.get(origin);
    if (known !== undefined) {
      void check(origin);
      return callback(null, { origin: known ? origin : false });
    }
    void check(origin).then((allowed) => {
      if ((req as { res?: { isAborted?: boolean } }).res?.isAborted) return;
      callback(null, { origin: allowed ? origin : false });
    });
  };
}
