/**
 * Push: the node that made a change sends it to the sockets that must see it, through the bus's
 * rooms: the agent's whole state to the agent's widgets (event `state`), pending commands and dial
 * requests to the engine (event `work`). Pushes only accelerate: the same truth is in every poll
 * and heartbeat, and pushed commands stay pending until the engine acks them.
 */
import { isRefusal } from '../../shared/errors.js';
import type { EngineWork, PushedState } from '../../shared/events.js';
import type { Realtime } from '../../shared/types.js';
import type { Bus } from '../bus/index.js';
import type { Clock, Timer } from '../clock.js';
import { coalesce } from '../store/coalesce.js';
import type { Db } from '../store/index.js';
import type { Commands } from './commands/service.js';
import type { Directory } from './directory.js';
import { epochMs } from './changes.js';
import { handOverWork, type HandOver } from './engines/work.js';
import { trackPushDebt, type PushDebt } from './push-debt.js';
import { renderWidgetState } from './agent-state.js';
import type { WidgetStates } from './widget-states.js';

export const rooms = {
  agent: (integrationId: string, memberId: string) => `agent:${integrationId}:${memberId}`,
  engine: (engineId: string) => `engine:${engineId}`,
};

export interface PushDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  realtime: Realtime;
  widgetStates: WidgetStates;
  commands: Commands;
  directory: Directory;
  /** observes each push: what, and when the change it carries began to be made (ms since the epoch) */
  observe?: (kind: 'state' | 'work', changedAt: number) => void;
  log?: (message: string, error?: unknown) => void;
  /** what push-debt.ts counted, or heard of (for the metrics) */
  observeDebt?: (event: 'counted' | 'heard') => void;
}

/** Agents whose last pushed version a node remembers (a few MB at most). */
const MAX_REMEMBERED_AGENTS = 50_000;

/**
 * A push whose store read failed (a statement timeout, a blip) is tried again, 250 ms after, then
 * doubling up to every 5 s, for up to two minutes: sockets that are up poll only once a minute or
 * so (the SDK's live check), so a push lost here would leave a widget showing an old state until
 * then, and a dial request waiting for the window's next heartbeat. Each try reads what is current then.
 */
export const PUSH_RETRY = { firstMs: 250, maxMs: 5_000, forMs: 120_000 } as const;

/** The longest c2c waits for its pushes (and their retries) before it closes (Pusher.settled). */
const SETTLE_WITHIN_MS = 15_000;

export function createPusher(deps: PushDeps) {
  const { db, bus, clock } = deps;

  /** What an agent's widgets are pushed: the WidgetState without its per-session field (none for an agent no longer valid). */
  async function agentState(integrationId: string, memberId: string): Promise<PushedState | undefined> {
    const integration = await deps.directory.integration(integrationId);
    if (!integration) return undefined;
    let agent;
    try {
      agent = await deps.directory.agent(integration, memberId);
    } catch (error) {
      // the store not answering is tried again (PUSH_RETRY), never taken for an agent gone
      if (!isRefusal(error)) throw error;
      return undefined; // no longer a valid agent: the gateway ends those sockets
    }
    const data = await deps.widgetStates.load(integrationId, memberId);
    const { session_expires_at: _perSession, ...state } = renderWidgetState(
      data,
      { integration, agent, sessionExpiresAt: 0, realtime: deps.realtime },
      clock.now(),
    );
    return state;
  }

  /**
   * Per agent room, the newest version this node pushed. Each push reads the state as it runs, so
   * changes in quick succession would each read, and send, the same newest version, and a slow read
   * could send an older one after it. Clients keep the newest either way; this spares the fan-out.
   * Versions only rise (agent_versions rows are never deleted); forgetting, when the map is full,
   * risks no more than one repeat per agent.
   */
  const pushed = new Map<string, number>();

  /** Pushes the agent's state, unless a push since the change of `version` has carried it. */
  async function pushState(integrationId: string, memberId: string, version = Infinity, changedAt = epochMs()): Promise<void> {
    const room = rooms.agent(integrationId, memberId);
    if (!bus.mayHaveListeners(room) || version <= (pushed.get(room) ?? 0)) return;
    const state = await agentState(integrationId, memberId);
    if (!state || state.version <= (pushed.get(room) ?? 0)) return;
    if (pushed.size >= MAX_REMEMBERED_AGENTS) pushed.clear();
    pushed.set(room, state.version);
    bus.io.to(room).emit('state', state);
    deps.observe?.('state', changedAt);
  }

  // Hand-overs of a busy node (the snapshots of a reconnect storm) share a statement.
  const handOverTogether = (handOver: HandOver) =>
    coalesce((engineIds: string[]) => handOverWork(db, engineIds, clock.now(), handOver, () => deps.commands.onRedelivery?.()), { isolate: true });
  const handOvers = { unacked: handOverTogether('unacked'), due: handOverTogether('due'), new: handOverTogether('new') };

  /**
   * Commands and dial requests for an engine: all it has not acked (`unacked`, its snapshot), those
   * a heartbeat would hand over (`due`: queued, or acks overdue), or only new ones.
   */
  const engineWork = (engineId: string, handOver: keyof typeof handOvers) => handOvers[handOver](engineId);

  /** Pushes the work handed over in the change's own statement, or hands the new work over now. */
  async function pushWork(engineId: string, handedOver: EngineWork | undefined, changedAt = epochMs()): Promise<void> {
    const room = rooms.engine(engineId);
    if (!handedOver && !bus.mayHaveListeners(room)) return;
    bus.io.to(room).emit('work', handedOver ?? (await engineWork(engineId, 'new')));
    deps.observe?.('work', changedAt);
  }

  /** Per room, the retry of a failed push waiting to run: one covers every change of the room since. */
  const retries = new Map<string, Timer>();
  /** stopped: a push under way that fails (the store closing under it) is not tried again */
  let stopped = false;

  /** pushes under way (their first try or a retry running now) */
  const underWay = new Set<Promise<void>>();
  /** the count of changes other nodes missed, while started (push-debt.ts) */
  let debt: PushDebt | undefined;

  function run(room: string, push: () => Promise<void>, firstAt = clock.now(), waitMs: number = PUSH_RETRY.firstMs): void {
    const pushing = push();
    underWay.add(pushing);
    void pushing.then(() => underWay.delete(pushing), () => underWay.delete(pushing));
    pushing.catch((error: unknown) => {
      if (stopped || retries.has(room)) return;
      const givingUp = clock.now() - firstAt + waitMs > PUSH_RETRY.forMs;
      deps.log?.(givingUp ? 'push failed; no more retries: clients get it on their next change or reconnect' : 'push failed; trying again', error);
      if (givingUp) return;
      const retry = clock.after(waitMs, () => {
        retries.delete(room);
        run(room, push, firstAt, Math.min(waitMs * 2, PUSH_RETRY.maxMs));
      });
      retries.set(room, retry);
    });
  }

  return {
    agentState,
    engineWork,
    pushState,
    /**
     * Resolves once the pushes under way, and the retries of those that failed, have been sent, or
     * have failed for good, and changes other nodes missed are counted in the store: true; false
     * when some were still waiting after `withinMs` (real time). For a short-lived node (c2c)
     * before it closes: its pushes are the change's only ones.
     */
    async settled(withinMs = SETTLE_WITHIN_MS): Promise<boolean> {
      let late = false;
      const deadline = setTimeout(() => void (late = true), withinMs);
      try {
        while (underWay.size > 0 || retries.size > 0 || debt?.pending()) {
          if (late) return false;
          if (underWay.size > 0) await Promise.race([Promise.allSettled([...underWay]), new Promise((resolve) => setTimeout(resolve, 50))]);
          else await new Promise((resolve) => setTimeout(resolve, 50)); // a retry's turn to come, or a count under way
        }
        return true;
      } finally {
        clearTimeout(deadline);
      }
    },
    /**
     * Starts pushing this node's own changes, and the store's news of changes other nodes could not
     * announce (push-debt.ts); returns what stops both (retries waiting included).
     */
    start() {
      stopped = false;
      const tracked = trackPushDebt(deps);
      debt = tracked;
      const unsubscribe = bus.subscribe((message, { local }) => {
        if (!local) return;
        if (message.type === 'agent') {
          const { integrationId, memberId, version, at } = message;
          run(rooms.agent(integrationId, memberId), () => pushState(integrationId, memberId, version, at));
        }
        if (message.type === 'engine' && message.reason === 'work') {
          const { engineId, work, at } = message;
          run(rooms.engine(engineId), () => pushWork(engineId, work, at));
        }
      });
      return () => {
        stopped = true;
        unsubscribe();
        tracked.stop();
        for (const retry of retries.values()) retry.cancel();
        retries.clear();
      };
    },
  };
}

export type Pusher = ReturnType<typeof createPusher>;
