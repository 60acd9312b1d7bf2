/**
 * The WidgetState the SDK holds. Pushes and polls race, so a snapshot is applied only when its
 * version is greater than the one held (DESIGN: a lost or late push is healed by the next
 * snapshot). Versions count per agent: a state of another agent than the held one (a new session,
 * after a rejected token, for whoever is logged in now) is applied whatever its version. The server's clock is tracked from the last snapshot so durations are the server's:
 * server_time − answered_at at that snapshot plus the local time elapsed since it was received.
 */
import type { Call, WidgetState } from './contract.js';

export class Snapshots {
  state: WidgetState | null = null;
  /** server_time of the reference snapshot (s) and the local time it was received (ms) */
  private serverTime = 0;
  private receivedAt = 0;
  private hasClock = false;
  private applied = false;

  constructor(private readonly now: () => number) {}

  get version(): number {
    return this.state ? this.state.version : -Infinity;
  }

  /** Whether a snapshot was ever applied (forget() does not undo that). */
  get seen(): boolean {
    return this.applied;
  }

  /** Drops the held state (a new session for another agent): the next snapshot is applied whatever its version. */
  forget(): void {
    this.state = null;
  }

  /**
   * Offers a pushed or polled snapshot. Returns true when it was applied (a newer version). A
   * snapshot of the same version only refreshes the clock reference, unless it was `polled` and
   * shows the agent otherwise (its policy, name, department; whether push is available): an older
   * one is ignored. Those are what a state's tag covers besides its version, because a node that
   * has not yet heard of an operator's change (a bus message lost) renders the new version with
   * the agent it cached before, and corrects it once it hears, or within a minute. Ignored, such a
   * correction stayed hidden behind 304s until the agent's next change, hours on for an idle
   * agent; taken, the widget shows what the node that answered last renders, which every node
   * renders alike within that minute. (Everything else in a state of one version is the same
   * whichever node renders it, but for its clocks.)
   */
  offer(snapshot: WidgetState, polled = false): boolean {
    const held = this.state && this.state.agent?.identifier === snapshot.agent?.identifier ? this.state : null;
    if (held && snapshot.version < held.version) return false;
    this.serverTime = snapshot.server_time;
    this.receivedAt = this.now();
    this.hasClock = true;
    if (held && snapshot.version === held.version && !(polled && agentShown(snapshot) !== agentShown(held))) return false;
    // A push carries no session_expires_at (it is per session): keep the one held.
    this.state = { ...snapshot, session_expires_at: snapshot.session_expires_at ?? held?.session_expires_at };
    this.applied = true;
    return true;
  }

  /** The server's clock now, in ms, as estimated from the reference snapshot (local clock before any). */
  serverNowMs(): number {
    const now = this.now();
    return this.hasClock ? this.serverTime * 1000 + (now - this.receivedAt) : now;
  }

  /**
   * The call's duration in whole seconds: server_time − answered_at from the reference snapshot,
   * plus the local time since it was received. null before the call is answered.
   */
  durationOf(call: Call | null): number | null {
    if (!call || call.answered_at === null || !this.hasClock) return null;
    if (call.ended_at !== null) return call.duration; // final: the server's own figure
    const elapsed = (this.now() - this.receivedAt) / 1000;
    return Math.max(0, Math.floor(this.serverTime - call.answered_at + elapsed));
  }
}

/** What a state shows of its agent: what its tag covers besides the version (api/domain/agents.ts, `shown`). */
const agentShown = (state: WidgetState): string => JSON.stringify([state.policy, state.agent, state.realtime?.available]);

/** mm:ss, or h:mm:ss from an hour. */
export function formatDuration(total: number): string {
  const s = Math.floor(total % 60);
  const m = Math.floor(total / 60) % 60;
  const h = Math.floor(total / 3600);
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${pad(m)}:${pad(s)}`;
}
