/**
 * Handshake authentication: the client sends its token as `auth: {token}`. A widget token is
 * accepted only from its own origin (the same rules as REST, allow-all included); an engine token
 * only from the service's own pages or an allowed extension. A refusal reaches the client as
 * connect_error with data {code, final, message}: `final` means this credential will never work,
 * so the client must not retry with it. Refused handshakes count against their address's rate
 * limit, an engine's connections count with its heartbeats, and a credential holds a bounded
 * number of sockets on a node (limits.ts).
 */
import type { Socket } from 'socket.io';
import { C2CError, type ErrorCode } from '../shared/errors.js';
import type { ConnectRefusal, SocketEnd } from '../shared/events.js';
import { CREDENTIAL_PREFIX } from '../shared/prefixes.js';
import { clientAddressOf } from '../api/http/client-address.js';
import { isBadCredential } from '../api/ratelimit/refusals.js';
import type { Services } from '../api/services.js';
import { assertEngineOrigin } from '../api/domain/engines/origins.js';
import type { Isolation } from './isolation.js';
import type { SocketLimits } from './limits.js';
import { ownerOf, type LocalSockets } from './local-sockets.js';

export interface WidgetSocketData {
  kind: 'widget';
  token: string;
  origin: string;
  /** the client's address, which its commands' rate limit counts by (as REST's) */
  ip: string;
  sessionId: string;
  integrationId: string;
  memberId: string;
  expiresAt: number;
}

export interface EngineSocketData {
  kind: 'engine';
  token: string;
  engineId: string;
  integrationId: string;
  memberId: string;
}

export type SocketData = WidgetSocketData | EngineSocketData;

/** Codes after which retrying later may succeed with the same credential. */
const RETRYABLE: ReadonlySet<string> = new Set<ErrorCode | SocketEnd['code']>(['service_unavailable', 'internal_error', 'rate_limited', 'server_restarting', 'token_expired']);

export function endFor(error: unknown): SocketEnd {
  const known = error instanceof C2CError ? error : new C2CError('internal_error');
  const end: SocketEnd = { code: known.code, final: !RETRYABLE.has(known.code), message: known.message };
  if (known.retryAfter !== undefined) end.retry_after = known.retryAfter;
  return end;
}

/**
 * The client's address as REST (fastify's request.ip) takes it, so that both count against one
 * limit: the connection's, written as Node writes it (uWS writes IPv6 in full:
 * 0000:…:ffff:7f00:0001), or behind trusted proxies (TRUST_PROXY) the X-Forwarded-For entry the
 * last of them vouches for (api/http/client-address.ts).
 */
export function clientAddress(services: Services, socket: Socket): string {
  const forwarded = socket.handshake.headers['x-forwarded-for'];
  return clientAddressOf(services.config.trustProxy, asNodeWritesIt(socket.handshake.address), Array.isArray(forwarded) ? forwarded.join(',') : forwarded);
}

const IPV4_MAPPED = /^(?:0{1,4}:){5}ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i;

function asNodeWritesIt(address: string): string {
  const mapped = IPV4_MAPPED.exec(address);
  if (mapped) {
    const [high, low] = [parseInt(mapped[1]!, 16), parseInt(mapped[2]!, 16)];
    return `::ffff:${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
  }
  if (!address.includes(':')) return address;
  try {
    return new URL(`http://[${address}]`).hostname.slice(1, -1);
  } catch {
    return address;
  }
}

const NOTHING = Object.freeze({});

/**
 * Lets go of what only the handshake needed, once it has passed: the handshake's headers, query
 * and auth, which socket.data now stands for, and its URL and its time as a date string (a string
 * each, per socket). A browser's headers (user agent, languages, fetch metadata) would otherwise
 * stay with each socket for its whole life. The connection's request went when the handshake began
 * (claimConnection).
 */
export function releaseHandshake(socket: Socket): void {
  Object.assign(socket.handshake, { headers: NOTHING, query: NOTHING, auth: NOTHING, url: '', time: '' });
}

/**
 * Takes the socket's connection for this handshake: false if another handshake had it already.
 * The upgrade request engine.io keeps on the connection is let go of now (Socket.IO's
 * performance-tuning advice, "discard the initial HTTP request"; the socket's handshake holds the
 * headers it needs), and its absence marks the connection as taken.
 */
function claimConnection(socket: Socket): boolean {
  const conn = socket.conn as { request: unknown };
  if (conn.request === null) return false;
  conn.request = null;
  return true;
}

/** Re-checks a connected socket's credential (after revocations, on each command), and notes its widget token's expiry as the store has it now. */
export async function reauthenticate(services: Services, data: SocketData) {
  await services.platform.assertEnabled();
  if (data.kind === 'widget') {
    const context = await services.sessions.authenticate(data.token, data.origin);
    // A refresh shortens the old token's life to a grace period: its sockets end with it (endings.ts).
    // Only ever earlier: a check that read the row before the refresh may answer after one that read it after.
    data.expiresAt = Math.min(data.expiresAt, context.session.expires_at);
    return { kind: 'widget' as const, context };
  }
  return { kind: 'engine' as const, context: await services.engines.authenticate(data.token) };
}

/** Checks the handshake's token (and origin): the socket's data, or a refusal. */
async function credentialOf(services: Services, socket: Socket, ip: string): Promise<SocketData> {
  await services.platform.assertEnabled();
  const token: unknown = socket.handshake.auth?.token;
  const origin = socket.handshake.headers.origin;
  if (typeof token === 'string' && token.startsWith(CREDENTIAL_PREFIX.widgetToken)) {
    const context = await services.sessions.authenticate(token, origin);
    return {
      kind: 'widget',
      token,
      origin: context.session.origin,
      ip,
      sessionId: context.session.id,
      integrationId: context.integration.id,
      memberId: context.agent.member.id,
      expiresAt: context.session.expires_at,
    } satisfies WidgetSocketData;
  }
  if (typeof token === 'string' && token.startsWith(CREDENTIAL_PREFIX.engineToken)) {
    // Checked when named, as REST checks it (engines/origins.ts). A browser names it on every
    // cross-origin request, so a page elsewhere cannot leave it out; it is missing from a
    // same-origin long-polling GET (the call window, with the gateway behind the site's own
    // address, where WebSockets are blocked) and from a client that is no browser, which holds the
    // token, the credential, either way.
    if (origin !== undefined) assertEngineOrigin(services.config, origin);
    const context = await services.engines.authenticate(token);
    return { kind: 'engine', token, engineId: context.engine.id, integrationId: context.integration.id, memberId: context.agent.member.id } satisfies EngineSocketData;
  }
  throw new C2CError('unauthorized', 'auth.token must be a widget token (c2cw_…) or an engine token (c2ce_…).');
}

export function handshake(services: Services, limits: SocketLimits, local: LocalSockets, isolation: Pick<Isolation, 'refusal'>) {
  const refuse = (next: (error?: Error) => void, refusal: ConnectRefusal) => {
    services.metrics.socketRefusals.inc({ code: refusal.code });
    next(Object.assign(new Error(refusal.message), { data: refusal }));
  };
  return async (socket: Socket, next: (error?: Error) => void) => {
    // One handshake per connection: the first lets go of the connection's request, and with it of
    // the client's address and origin, so another CONNECT on it could be neither checked nor
    // counted. Our clients open a connection for each attempt; this one is closed, once the refusal
    // has left (Socket.IO sends it on the next tick, and not on a closing connection).
    if (!claimConnection(socket)) {
      refuse(next, { code: 'invalid_request', final: false, message: 'A connection carries one handshake; open a new connection.' });
      setImmediate(() => socket.conn.close());
      return;
    }
    // Cut off from Redis and the database, the node could only refuse it after a wait on the store.
    const isolated = isolation.refusal;
    if (isolated) return refuse(next, isolated);
    const ip = clientAddress(services, socket);
    try {
      limits.admitHandshake(ip);
    } catch (error) {
      return refuse(next, endFor(error));
    }
    let data: SocketData;
    let refused = false;
    try {
      data = await credentialOf(services, socket, ip);
    } catch (error) {
      // A bad credential counts against its address (limits.ts); a good one refused by policy does not.
      refused = isBadCredential(error);
      return refuse(next, endFor(error));
    } finally {
      await limits.handshakeDone(ip, refused);
    }
    const owner = ownerOf(data);
    let connected: () => void;
    try {
      if (data.kind === 'engine') await limits.engineConnect(data.engineId);
      connected = limits.admitSocket(owner, local.count(owner));
    } catch (error) {
      return refuse(next, endFor(error));
    }
    socket.data = data;
    next();
    // Socket.IO connects the socket on the next tick (a tick queued before this one), or drops it
    // if its client left meanwhile: either way, by this one it is counted in `local` or gone.
    process.nextTick(connected);
  };
}
