/**
 * CORS for the gateway's long-polling requests, by REST's origin rules, without an engine.io
 * middleware. A middleware would run on every request, WebSocket upgrades included, and engine.io
 * keeps the response wrapper it builds for one with every WebSocket for its whole life (about
 * 0.3 KB a socket). Browsers don't apply CORS to WebSockets, and the handshake checks each token's
 * origin, so only long-polling needs these headers:
 * - the headers go on through engine.io's `headers` event, which is synchronous: each Origin's
 *   last answer is given at once and refreshed in the background through the REST policy, which
 *   the bus keeps current (an Origin just removed from an integration gets one more stale answer;
 *   CORS is not what guards a token);
 * - an Origin this node has not seen waits in `allowRequest`, which engine.io awaits before a
 *   handshake (its first request is a handshake GET, which has no body). If the client hangs up
 *   meanwhile, the request is never answered: uWS throws on writes to a closed request.
 * - a preflight (OPTIONS; socket.io-client sends one only with extra headers) is answered on uWS,
 *   before engine.io, which would refuse it.
 * Long-polling POSTs are never held up: uWS drops a body that arrives before its handler reads it.
 * engine.io's own error answers (an unknown session, say) carry no CORS headers; the client treats
 * them as the transport error they are either way.
 */
import type { ServerOptions } from 'socket.io';
import type { HttpRequest as UwsRequest, HttpResponse } from 'uWebSockets.js';
import { createOriginPolicy } from '../api/http/cors.js';
import type { Services } from '../api/services.js';
import { engineOriginAllowed } from '../api/domain/engines/origins.js';

/** What engine.io hands these hooks: the uWS request, with its headers copied and its response. */
interface EngineRequest {
  headers: Record<string, string | undefined>;
  res?: HttpResponse;
}

/** Typed for Node's requests; on uWS engine.io passes an EngineRequest. */
type AllowRequest = NonNullable<ServerOptions['allowRequest']>;

export interface GatewayCors {
  /** engine.io's allowRequest (handshakes only): waits for the answer of an Origin not seen yet. Never refuses. */
  allowRequest: AllowRequest;
  /** engine.io's `headers` event: adds the CORS headers to a long-polling response. */
  headers(headers: Record<string, string>, req: EngineRequest): void;
  /** The uWS handler for OPTIONS on the Socket.IO path. */
  preflight(res: HttpResponse, req: UwsRequest): void;
}

/** How many Origins' answers a node keeps (past that it starts again). */
const MAX_ORIGINS = 10_000;

const isUpgrade = (req: EngineRequest) => String(req.headers.upgrade).toLowerCase() === 'websocket';

export function gatewayCors(services: Services): GatewayCors {
  const widgetOrigins = createOriginPolicy(services);
  const answers = new Map<string, boolean>();
  const check = async (origin: string): Promise<boolean> => {
    const allowed = engineOriginAllowed(services.config, origin) || (await widgetOrigins(origin).catch(() => false));
    if (answers.size >= MAX_ORIGINS) answers.clear();
    answers.set(origin, allowed);
    return allowed;
  };
  /** The last answer for this Origin (undefined if there is none yet), and a fresh one on its way. */
  const lookup = (origin: string) => ({ last: answers.get(origin), fresh: check(origin) });
  /** Answers once the fresh answer is in, unless the client hung up meanwhile. */
  const whenChecked = (res: HttpResponse, fresh: Promise<boolean>, reply: (allowed: boolean) => void) => {
    let aborted = false;
    res.onAborted(() => void (aborted = true));
    void fresh.then((allowed) => !aborted && reply(allowed));
  };

  return {
    allowRequest(message, callback) {
      const req = message as unknown as EngineRequest;
      const origin = req.headers.origin;
      if (!origin || isUpgrade(req) || answers.has(origin) || !req.res) return callback(null, true);
      whenChecked(req.res, check(origin), () => callback(null, true));
    },

    headers(headers, req) {
      const origin = req.headers.origin;
      if (!origin || isUpgrade(req)) return;
      if (lookup(origin).last) headers['Access-Control-Allow-Origin'] = origin;
      headers['Vary'] = 'Origin';
    },

    preflight(res, req) {
      // The uWS request is only readable until this handler returns.
      const origin = req.getHeader('origin');
      const requested = req.getHeader('access-control-request-headers');
      const reply = (allowed: boolean) =>
        res.cork(() => {
          res.writeStatus('204 No Content').writeHeader('Vary', 'Origin');
          if (allowed) {
            res.writeHeader('Access-Control-Allow-Origin', origin).writeHeader('Access-Control-Allow-Methods', 'GET,POST').writeHeader('Access-Control-Max-Age', '600');
            if (requested) res.writeHeader('Access-Control-Allow-Headers', requested);
          }
          res.end();
        });
      if (!origin) return reply(false);
      const { last, fresh } = lookup(origin);
      if (last !== undefined) return reply(last);
      whenChecked(res, fresh, reply);
    },
  };
}
