/**
 * Engine sockets that drop (api/domain/engines/dropped.ts says what follows): the node that held
 * the socket waits LIMITS.engineDropGraceSeconds on the clock, then has the store mark the engine
 * offline if it has not been heard from since and holds no call, unless the engine has a socket on
 * this node again. Endings the server made are not drops: a replaced, closed or revoked engine is
 * closed already, and the clients of a node going away (server_restarting) reconnect to another.
 */
import type { Socket } from 'socket.io';
import { LIMITS } from '../shared/limits.js';
import type { Timer } from '../api/clock.js';
import type { Services } from '../api/services.js';
import type { SocketData } from './handshake.js';
import type { LocalSockets } from './local-sockets.js';

/** Socket.IO's reasons for a disconnect the server asked for. */
const SERVER_ENDED: ReadonlySet<string> = new Set(['server namespace disconnect', 'server shutting down']);

export class EngineDrops {
  /** per engine, the check its last drop on this node set, until it runs */
  readonly #pending = new Map<string, Timer>();
  #stopped = false;

  constructor(
    private readonly services: Services,
    private readonly local: LocalSockets,
  ) {}

  dropped(socket: Socket, reason: string): void {
    const data = socket.data as SocketData;
    if (this.#stopped || data.kind !== 'engine' || SERVER_ENDED.has(reason)) return;
    const { clock, engines } = this.services;
    const drop = { engineId: data.engineId, at: clock.now() };
    this.#pending.get(drop.engineId)?.cancel();
    const check = clock.after(LIMITS.engineDropGraceSeconds * 1000, async () => {
      if (this.#pending.get(drop.engineId) === check) this.#pending.delete(drop.engineId);
      if (this.#stopped || this.local.get(`engine:${drop.engineId}`).length > 0) return;
      await engines.markDroppedOffline(drop).catch((error: unknown) => this.services.log?.('could not mark a dropped engine offline', error));
    });
    this.#pending.set(drop.engineId, check);
  }

  stop(): void {
    this.#stopped = true;
    for (const check of this.#pending.values()) check.cancel();
    this.#pending.clear();
  }
}
