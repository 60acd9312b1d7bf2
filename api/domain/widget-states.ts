/**
 * WidgetState for the poll path, push and session responses, with a per-agent cache. The cache
 * holds what only changes with the agent's version; a bus message for a newer version drops it
 * (on this node at once, on others as soon as the bus delivers), and a load that raced a newer
 * change is not cached. While the bus is down such messages could be lost, so every load reads the
 * store. A message lost without this node noticing (its node killed while cut off from Redis) would
 * leave an entry stale for good: as in the bus caches, none is used once it is a minute old without
 * the store's word that the agent's version is still the one it was made from (a read of the
 * version alone, far cheaper than the state's), so a widget's conditional poll (the SDK's live
 * check) sees the store's state within that. Time-dependent fields are rendered at send time.
 */
import type { Realtime, WidgetState } from '../../shared/types.js';
import type { Bus } from '../bus/index.js';
import type { Clock } from '../clock.js';
import type { Db } from '../store/index.js';
import type { WidgetContext } from './sessions.js';
import { coalesce } from '../store/coalesce.js';
import { BUS_CACHE_MAX_AGE_MS } from './bus-cache.js';
import { loadAgentStates, loadAgentVersions, renderWidgetState, type AgentStateData } from './agent-state.js';

const MAX_CACHED_AGENTS = 50_000;

export function createWidgetStates({ db, bus, clock, realtime }: { db: Db; bus: Bus; clock: Clock; realtime: Realtime }) {
  const cache = new Map<string, { data: AgentStateData; loadedAt: number }>();
  /**
   * Per agent with a load under way, how many, and the newest version the bus announced meanwhile:
   * a load that read an older one raced that change and is not cached. Only agents being loaded
   * have an entry (every node hears every agent's changes: a map of all would only grow).
   */
  const loading = new Map<string, { count: number; newest: number }>();
  /**
   * Resyncs so far: the bus reconnected, and the messages of the outage are lost. A load that began
   * before one may have read a change whose message was lost, or missed one: it is not cached.
   */
  let resyncs = 0;
  const key = (integrationId: string, memberId: string) => `${integrationId}:${memberId}`;
  // Loads of a busy node (a reconnect storm's snapshots, polls after a deploy) share a statement.
  const loadTogether = coalesce((agents: Array<{ integrationId: string; memberId: string }>) => loadAgentStates(db, agents), { isolate: true });
  const versionsTogether = coalesce((agents: Array<{ integrationId: string; memberId: string }>) => loadAgentVersions(db, agents), { isolate: true });

  bus.subscribe((message) => {
    if (message.type === 'agent') {
      const k = key(message.integrationId, message.memberId);
      const underWay = loading.get(k);
      if (underWay) underWay.newest = Math.max(underWay.newest, message.version);
      const cached = cache.get(k);
      if (cached && cached.data.version < message.version) cache.delete(k);
    } else if (message.type === 'resync') {
      resyncs += 1;
      cache.clear();
    }
  });

  /**
   * Whether an entry over a minute old is still the agent's state: the store has its version, and
   * nothing changed here while that was read (a newer version announced drops the entry, a resync
   * the whole cache). It is then good for another minute.
   */
  async function stillCurrent(integrationId: string, memberId: string, entry: { data: AgentStateData; loadedAt: number }): Promise<boolean> {
    const k = key(integrationId, memberId);
    const [startedAt, checkedAt] = [resyncs, clock.now()];
    const version = await versionsTogether({ integrationId, memberId });
    if (version !== entry.data.version || cache.get(k) !== entry || resyncs !== startedAt || bus.state() !== 'up') return false;
    entry.loadedAt = checkedAt;
    return true;
  }

  async function load(integrationId: string, memberId: string): Promise<AgentStateData> {
    const k = key(integrationId, memberId);
    const cached = bus.state() === 'up' ? cache.get(k) : undefined;
    if (cached && clock.now() - cached.loadedAt < BUS_CACHE_MAX_AGE_MS) return cached.data;
    if (cached && (await stillCurrent(integrationId, memberId, cached))) return cached.data;
    const startedAt = resyncs;
    const underWay = loading.get(k) ?? { count: 0, newest: 0 };
    underWay.count += 1;
    loading.set(k, underWay);
    const loadedAt = clock.now();
    let data: AgentStateData;
    try {
      data = await loadTogether({ integrationId, memberId });
    } finally {
      underWay.count -= 1;
      if (underWay.count === 0) loading.delete(k);
    }
    if (bus.state() === 'up' && resyncs === startedAt && data.version >= underWay.newest) {
      if (cache.size >= MAX_CACHED_AGENTS) cache.clear();
      cache.set(k, { data, loadedAt });
    }
    return data;
  }

  const render = (widget: WidgetContext, data: AgentStateData): WidgetState =>
    renderWidgetState(
      data,
      { integration: widget.integration, agent: widget.agent, sessionExpiresAt: widget.session.expires_at, realtime },
      clock.now(),
    );

  return {
    load,
    render,
    /** The agent's WidgetState as this widget sees it, now. */
    async forWidget(widget: WidgetContext): Promise<WidgetState> {
      return render(widget, await load(widget.integration.id, widget.agent.member.id));
    },
    /**
     * An entity tag for conditional polls: the state changes with the version, the session, and
     * what is shown of the agent. A change to the agent's policy or name bumps the version too, but
     * a node whose caches have not yet heard of it renders the new version with the old agent: its
     * tag then differs from the one rendered once they have.
     */
    etag(widget: WidgetContext, data: AgentStateData): string {
      return `"${data.version}.${widget.session.expires_at}.${realtime.available ? 1 : 0}.${widget.agent.shown}"`;
    },
  };
}

export type WidgetStates = ReturnType<typeof createWidgetStates>;
