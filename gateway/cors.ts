/**
 * CORS for the gateway's long-polling requests, by REST's origin rules, without an engine.io
 * middleware. A middleware would run on every request, WebSocket upgrades included, and engine.io
 * keeps the response wrapper it builds for one with every WebSocket for its whole life (about
 * 0.3 KB a socket). Browsers don't apply CORS to WebSockets, and the handshake checks each token's
 * origin, so only long-polling needs these headers:
 * - the headers go on through engine.io's `headers` event, which is synchronous: it is answered
 *   from the allowed origins this node last read (OriginPolicy, which the bus keeps current: an
 *   Origin just removed from an integration may get one more stale answer while they are read
 *   again; CORS is not what guards a token);
 * - before this node has read them, or from an Origin they did not allow once an integration has
 *   changed, a handshake waits in `allowRequest` for a new read; engine.io awaits it before a
 *   handshake (its first request is a handshake GET, which has no body). If the client
 *   hangs up meanwhile, the request is never answered: uWS throws on writes to a closed request.
 * - a preflight (OPTIONS; socket.io-client sends one only with extra headers) is answered on uWS,
 *   before engine.io, which would refuse it.
 * Long-polling POSTs are never held up: uWS drops a body that arrives before its handler reads it.
 * engine.io's own error answers (an unknown session, say) carry no CORS headers; the client treats
 * them as the transport error they are either way.
 */
import type { ServerOptions } from 'socket.io';
import type { HttpRequest as UwsRequest, HttpResponse } from 'uWebSockets.js';
import { OriginPolicy } from '../api/http/origin-policy.js';
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
  /** engine.io's allowRequest (handshakes only): waits until this node has read the allowed origins. Never refuses. */
  allowRequest: AllowRequest;
  /** engine.io's `headers` event: adds the CORS headers to a long-polling response. */
  headers(headers: Record<string, string>, req: EngineRequest): void;
  /** The uWS handler for OPTIONS on the Socket.IO path. */
  preflight(res: HttpResponse, req: UwsRequest): void;
}

const isUpgrade = (req: EngineRequest) => String(req.headers.upgrade).toLowerCase() === 'websocket';

export function gatewayCors(services: Services): GatewayCors {
  const integrations = new OriginPolicy(services);
  const ownPage = (origin: string) => engineOriginAllowed(services.config, origin);
  /** At once, from what was last read: undefined before the first read. */
  const lastAnswer = (origin: string) => ownPage(origin) || integrations.lastAnswer(origin);
  /** As the store says now; a store that cannot answer allows nothing. */
  const answer = async (origin: string) => ownPage(origin) || (await integrations.allows(origin).catch(() => false));
  /** Answers once the answer is in, unless the client hung up meanwhile. */
  const whenChecked = (res: HttpResponse, answered: Promise<boolean>, reply: (allowed: boolean) => void) => {
    let aborted = false;
    res.onAborted(() => void (aborted = true));
    void answered.then((allowed) => !aborted && reply(allowed));
  };

  return {
    allowRequest(message, callback) {
      const req = message as unknown as EngineRequest;
      const origin = req.headers.origin;
      if (!origin || isUpgrade(req) || lastAnswer(origin) !== undefined || !req.res) return callback(null, true);
      whenChecked(req.res, answer(origin), () => callback(null, true));
    },

    headers(headers, req) {
      const origin = req.headers.origin;
      if (!origin || isUpgrade(req)) return;
      if (lastAnswer(origin)) headers['Access-Control-Allow-Origin'] = origin;
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
      const last = lastAnswer(origin);
      if (last !== undefined) return reply(last);
      whenChecked(res, answer(origin), reply);
    },
  };
}
