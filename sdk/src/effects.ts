/**
 * Local effects of the agent's controls (spec section 6: "control effects in the widget update at
 * once and are confirmed by the poll"). An effect is shown until a snapshot shows it (confirmed),
 * the command is refused (reverted), or EFFECT_MS passes (the snapshots' truth wins again).
 */
import { isLive, type Call, type Engine } from './contract.js';

/** How long a local effect waits for a snapshot to confirm it. */
export const EFFECT_MS = 15_000;

export type Pending = 'ending' | 'answering';

interface Shown {
  available?: { value: boolean; until: number };
  muted?: { value: boolean; until: number };
  /** a hangup or decline (ending), or an answer (answering), of this call */
  pending?: { kind: Pending; callId: string; until: number };
}

export class LocalEffects {
  private shown: Shown = {};

  constructor(private readonly now: () => number) {}

  /** Shows muted or available at once; returns how to revert it (only if it is still the one shown). */
  flag(key: 'muted' | 'available', value: boolean): () => void {
    return this.put(key, { value, until: this.now() + EFFECT_MS });
  }

  /** Shows a hangup, decline or answer of the live call at once; returns how to revert it. */
  pend(kind: Pending, call: Call | null | undefined): () => void {
    if (!isLive(call)) return () => {};
    return this.put('pending', { kind, callId: call.request_id, until: this.now() + EFFECT_MS });
  }

  /** Drops the effects a new snapshot confirms, or makes moot. */
  confirm(engine: Engine | null, call: Call | null): void {
    const s = this.shown;
    if (s.muted && engine?.muted === s.muted.value) delete s.muted;
    if (s.available && engine?.available === s.available.value) delete s.available;
    const p = s.pending;
    // An ending lasts while the call is live; an answer while it still rings.
    if (p && !(isLive(call) && call.request_id === p.callId && (p.kind === 'ending' || call.status === 'incoming'))) delete s.pending;
  }

  /** Drops every effect (they were another agent's controls). */
  clear(): void {
    this.shown = {};
  }

  /** Drops the effects no snapshot confirmed in time. */
  expire(): void {
    const now = this.now();
    for (const key of ['muted', 'available', 'pending'] as const) if ((this.shown[key]?.until ?? Infinity) <= now) delete this.shown[key];
  }

  /** The engine as the widget shows it: with unconfirmed effects on top. */
  applyTo(engine: Engine | null): Engine | null {
    const { muted, available } = this.shown;
    if (!engine || (!muted && !available)) return engine;
    return { ...engine, muted: muted ? muted.value : engine.muted, available: available ? available.value : engine.available };
  }

  get pending(): Pending | null {
    return this.shown.pending?.kind ?? null;
  }

  get active(): boolean {
    return Object.keys(this.shown).length > 0;
  }

  private put<K extends keyof Shown>(key: K, value: NonNullable<Shown[K]>): () => void {
    this.shown[key] = value;
    return () => {
      if (this.shown[key] === value) delete this.shown[key];
    };
  }
}
