/**
 * What connected sockets do. Widgets get the agent's whole state at once and then every change;
 * they send commands and get exactly what POST /widget/commands answers. Engines get their pending
 * commands and dial requests at once and then every new one; they send heartbeats and acks. All of
 * it goes through the same domain services as REST, re-checking the credential each time.
 */
import type { Socket } from 'socket.io';
import { C2CError } from '../shared/errors.js';
import type { PushedState, SocketEnd } from '../shared/events.js';
import { LIMITS } from '../shared/limits.js';
import { CommandAck, HeartbeatRequest } from '../shared/schemas/engine-api.js';
import { Command } from '../shared/schemas/widget-api.js';
import { heartbeatBody } from '../api/domain/engines/responses.js';
import { rooms } from '../api/domain/push.js';
import type { Services } from '../api/services.js';
import { z } from 'zod';
import { endFor, reauthenticate, type EngineSocketData, type SocketData, type WidgetSocketData } from './handshake.js';

const Acks = z.array(CommandAck).max(100);

type Reply = (result: unknown) => void;

/** Answers a socket request like the REST endpoint would: the result, or the error envelope. */
async function answer(reply: unknown, work: () => Promise<unknown>): Promise<void> {
  const respond: Reply = typeof reply === 'function' ? (reply as Reply) : () => {};
  try {
    respond(await work());
  } catch (error) {
    respond(toEnvelope(error));
  }
}

function toEnvelope(error: unknown) {
  return (error instanceof C2CError ? error : new C2CError('internal_error')).toJSON();
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new C2CError('invalid_request', `${issue?.path.join('.') || 'payload'}: ${issue?.message ?? 'is invalid'}`);
  }
  return parsed.data;
}

export function onWidget(services: Services, socket: Socket, data: WidgetSocketData): void {
  void socket.join(rooms.agent(data.integrationId, data.memberId));
  void reauthenticate(services, data)
    .then(async (auth) => {
      if (auth.kind !== 'widget') return;
      const state: PushedState = await services.widgetStates.forWidget(auth.context);
      socket.emit('state', state);
    })
    .catch((error: unknown) => endWithError(socket, error));

  socket.on('command', (payload: unknown, reply: unknown) =>
    answer(reply, async () => {
      const auth = await reauthenticate(services, data);
      if (auth.kind !== 'widget') throw new C2CError('unauthorized');
      // As on REST: losing Redis must not take commands down with it, so nothing is counted then.
      const hit = await services.counter.hit(`w-ip:${socket.handshake.address}`, LIMITS.rateWindowMs).catch(() => undefined);
      if (hit && hit.count > LIMITS.widgetPerIpPerMinute * services.config.rateLimitScale) {
        throw new C2CError('rate_limited', undefined, { retryAfter: Math.ceil(hit.resetMs / 1000) });
      }
      return services.commands.execute(auth.context, parse(Command, payload));
    }),
  );
}

export function onEngine(services: Services, socket: Socket, data: EngineSocketData): void {
  void socket.join(rooms.engine(data.engineId));
  void services.pusher
    .engineWork(data.engineId, 'unacked')
    .then((work) => socket.emit('work', work))
    .catch((error: unknown) => endWithError(socket, error));

  const engine = async () => {
    const auth = await reauthenticate(services, data);
    if (auth.kind !== 'engine') throw new C2CError('unauthorized');
    return auth.context;
  };

  socket.on('heartbeat', (payload: unknown, reply: unknown) =>
    answer(reply, async () => {
      const result = await services.engines.heartbeat(await engine(), parse(HeartbeatRequest, payload));
      return heartbeatBody(result, services.clock.now());
    }),
  );

  socket.on('ack', (payload: unknown, reply: unknown) =>
    answer(reply, async () => {
      const acks = parse(Acks, payload);
      await services.engines.ack(await engine(), acks);
      services.metrics.acks.inc({ via: 'socket' }, acks.length);
      return { ok: true };
    }),
  );
}

/** Ends a socket with a reason the client can act on, then disconnects it. */
export function end(socket: Socket, reason: SocketEnd): void {
  socket.emit('ended', reason);
  socket.disconnect(true);
}

/** Ends a socket whose credential (or request) failed, with the failure's code. */
export function endWithError(socket: Socket, error: unknown): void {
  end(socket, endFor(error));
}

export function onConnection(services: Services) {
  return (socket: Socket) => {
    const data = socket.data as SocketData;
    services.metrics.sockets.inc({ kind: data.kind });
    socket.on('disconnect', () => services.metrics.sockets.dec({ kind: data.kind }));
    if (data.kind === 'widget') onWidget(services, socket, data);
    else onEngine(services, socket, data);
  };
}
