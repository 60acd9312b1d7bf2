/**
 * What connected sockets do. Widgets get the agent's whole state at once and then every change;
 * they send commands and get exactly what POST /widget/commands answers. Engines get their pending
 * commands and dial requests at once and then every new one; they send heartbeats and acks. All of
 * it goes through the same domain services as REST, re-checking the credential each time.
 */
import type { Socket } from 'socket.io';
import { C2CError, isRefusal } from '../shared/errors.js';
import type { PushedState, SocketEnd, SocketRefusal } from '../shared/events.js';
import { CommandAck, HeartbeatRequest } from '../shared/schemas/engine-api.js';
import { Command } from '../shared/schemas/widget-api.js';
import { heartbeatBody } from '../api/domain/engines/responses.js';
import { rooms } from '../api/domain/push.js';
import { WidgetTokenExpired } from '../api/domain/sessions.js';
import type { Services } from '../api/services.js';
import { z } from 'zod';
import { unstorable } from '../shared/schemas/storable.js';
import type { SocketLimits } from './limits.js';
import { endFor, reauthenticate, type EngineSocketData, type SocketData, type WidgetSocketData } from './handshake.js';

const Acks = z.array(CommandAck).max(100);

type Reply = (result: unknown) => void;

/**
 * Answers a socket request like the REST endpoint would: the result, or the error envelope. An
 * event carries one payload, then the acknowledgement callback when the client wants an answer
 * (Socket.IO puts it last); more is refused unread rather than run with its answer lost.
 */
async function answer(args: unknown[], work: (payload: unknown) => Promise<unknown>): Promise<void> {
  const last = args.at(-1);
  const respond: Reply = typeof last === 'function' ? (last as Reply) : () => {};
  const payloads = typeof last === 'function' ? args.length - 1 : args.length;
  try {
    if (payloads > 1) throw new C2CError('invalid_request', `An event takes one payload and an acknowledgement; this one had ${payloads} payloads.`);
    respond(await work(payloads === 0 ? undefined : args[0]));
  } catch (error) {
    respond(toEnvelope(error));
  }
}

function toEnvelope(error: unknown): SocketRefusal {
  const known = error instanceof C2CError ? error : new C2CError('internal_error');
  const refusal: SocketRefusal = known.toJSON();
  if (known.retryAfter !== undefined) refusal.retry_after = known.retryAfter;
  return refusal;
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const why = unstorable(value);
  if (why) throw new C2CError('invalid_request', `The payload cannot be taken: ${why}.`);
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new C2CError('invalid_request', `${issue?.path.join('.') || 'payload'}: ${issue?.message ?? 'is invalid'}`);
  }
  return parsed.data;
}

/**
 * What a connected socket does, by kind. The handlers are made once per node and shared by every
 * socket: Socket.IO calls each with its socket as `this`, so a held socket carries no closures of
 * ours (at tens of thousands of sockets a node, those would weigh more than our per-socket data).
 */
export function socketHandlers(services: Services, limits: SocketLimits) {
  /**
   * Requests under way (commands, heartbeats, acks): a stopping node waits for them (settled), so
   * that what they commit is announced on the bus before it closes. Announced nowhere, a change
   * would leave the other nodes' caches, and so every widget of its agent, on the state before it.
   */
  const underWay = new Set<Promise<void>>();
  /**
   * Set as the node stops: events that arrive after it are not taken up. Their senders hear the
   * socket end moments later (once the requests under way were answered) and send again elsewhere:
   * the SDK and the window over REST or their next socket, under the same request_id.
   */
  let stopping = false;
  const track = (request: Promise<void>): Promise<void> => {
    underWay.add(request);
    void request.finally(() => underWay.delete(request));
    return request;
  };

  const widgetContext = async (data: SocketData) => {
    const auth = await reauthenticate(services, data);
    if (auth.kind !== 'widget') throw new C2CError('unauthorized');
    return auth.context;
  };
  const engineContext = async (data: SocketData) => {
    const auth = await reauthenticate(services, data);
    if (auth.kind !== 'engine') throw new C2CError('unauthorized');
    return auth.context;
  };
  /**
   * The credential of a socket's request, checked again: refused, the request is answered with the
   * refusal and the socket is ended after it (the re-check that should have ended it may have
   * found the store not answering), rather than left connected, in its rooms, refusing each event.
   */
  const credentialOf = async <T>(socket: Socket, check: (data: SocketData) => Promise<T>): Promise<T> => {
    try {
      return await check(socket.data as SocketData);
    } catch (error) {
      if (isRefusal(error)) endAfterAnswer(socket, error);
      throw error;
    }
  };
  const endAfterAnswer = (socket: Socket, error: unknown) => setImmediate(() => socket.connected && endWithError(socket, error));
  /**
   * A request the store refused `unauthorized` although the credential's check passed: the check
   * was cached (up to a minute old) and the window has been closed, replaced or revoked since, the
   * news of it lost with a bus message. The socket is ended after the answer, as the check's own
   * refusal ends it, rather than left in its room, refusing each request, until its re-check.
   */
  const closedMeanwhile = (socket: Socket) => (error: unknown) => {
    if (error instanceof C2CError && error.code === 'unauthorized') endAfterAnswer(socket, error);
    throw error;
  };

  function command(this: Socket, ...args: unknown[]) {
    if (stopping) return;
    return track(answer(args, async (payload) => {
      const context = await credentialOf(this, widgetContext);
      await limits.widgetCommand((this.data as WidgetSocketData).ip);
      return services.commands.execute(context, parse(Command, payload));
    }));
  }

  function heartbeat(this: Socket, ...args: unknown[]) {
    if (stopping) return;
    return track(answer(args, async (payload) => {
      const context = await credentialOf(this, engineContext);
      await limits.engineHeartbeat(context.engine.id);
      const result = await services.engines.heartbeat(context, parse(HeartbeatRequest, payload), 'socket').catch(closedMeanwhile(this));
      return heartbeatBody(result, context, services.clock.now());
    }));
  }

  function ack(this: Socket, ...args: unknown[]) {
    if (stopping) return;
    return track(answer(args, async (payload) => {
      const context = await credentialOf(this, engineContext);
      await limits.engineAcks(context.engine.id);
      const acks = parse(Acks, payload);
      await services.engines.ack(context, acks);
      return { ok: true };
    }));
  }

  /**
   * A widget gets its agent's whole state at once, then every change (pushed to the agent's room).
   * The credential is checked again first: a revocation while the handshake was checked reached no
   * socket, and a socket in the room before its re-check (which a struggling store may take seconds
   * to answer) would meanwhile get the agent's pushes. From here on the socket is on the node's
   * list (server.ts), so an ending after the re-check reaches it. The state is read once the room
   * receives pushes: a change in between reaches it either way.
   */
  function widget(socket: Socket, data: WidgetSocketData): void {
    void (async () => {
      const context = await widgetContext(data);
      // (a socket that left meanwhile joins nothing: Socket.IO makes join a no-op once it left)
      void socket.join(rooms.agent(data.integrationId, data.memberId));
      await services.bus.roomsJoined();
      const state: PushedState = await services.widgetStates.forWidget(context);
      socket.emit('state', state);
    })().catch((error: unknown) => endWithError(socket, error));
    socket.on('command', command);
  }

  /**
   * An engine gets its unacked commands and dial requests at once (once its room receives pushes),
   * then every new one. Its credential is checked again first, before it joins its room, as a
   * widget's is: an engine closed, replaced or disabled while its handshake was being checked was
   * told nobody (the node's endings reach only sockets it holds), and would otherwise stay
   * connected until its next heartbeat, and be pushed commands meanwhile.
   */
  function engine(socket: Socket, data: EngineSocketData): void {
    void (async () => {
      await engineContext(data);
      void socket.join(rooms.engine(data.engineId));
      await services.bus.roomsJoined();
      socket.emit('work', await services.pusher.engineWork(data.engineId, 'unacked'));
    })().catch((error: unknown) => endWithError(socket, error));
    socket.on('heartbeat', heartbeat);
    socket.on('ack', ack);
  }

  const handle = (socket: Socket): void => {
    const data = socket.data as SocketData;
    if (data.kind === 'widget') widget(socket, data);
    else engine(socket, data);
  };
  /**
   * Takes up no more events, and resolves once the requests under way have been answered, or
   * after `withinMs` (real time).
   */
  const settled = async (withinMs: number): Promise<void> => {
    stopping = true;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...underWay]), new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)))]);
    clearTimeout(timer);
  };
  return Object.assign(handle, { settled });
}

/** Ends a socket with a reason the client can act on, then disconnects it. */
export function end(socket: Socket, reason: SocketEnd): void {
  socket.emit('ended', reason);
  socket.disconnect(true);
}

export const TOKEN_EXPIRED: SocketEnd = { code: 'token_expired', final: false, message: 'The widget token expired; reconnect with a refreshed token.' };

/**
 * Ends a connected socket whose credential (or request) failed, with the failure's code. A token
 * found expired is told to reconnect with a refreshed one (a handshake on it is refused
 * `unauthorized`, as REST refuses it, but a connected client gets the retry reason the expiry
 * sweep gives), whichever check found it: the sweep, a re-check, or the first snapshot's.
 */
export function endWithError(socket: Socket, error: unknown): void {
  end(socket, error instanceof WidgetTokenExpired ? TOKEN_EXPIRED : endFor(error));
}
