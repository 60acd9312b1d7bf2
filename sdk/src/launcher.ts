/**
 * enableCalls(): opening the call window inside the user's gesture. The window is opened (or
 * found) synchronously; the launch ticket is fetched afterwards and the window navigated to
 * window_url, whose fragment carries the ticket. window_name is stable per agent: remembered in
 * localStorage, it lets a later call bring the live window to the front instead of opening a
 * second one. A blocked popup gets an 'Open in new tab' link instead.
 */
import type { LaunchTicket, WindowMode } from './contract.js';
import { SdkError } from './http.js';
import type { Clock, TimerHandle } from './timing.js';

export type WindowOpener = (url: string, target: string, features?: string) => Window | null;

export interface LaunchDeps {
  open: WindowOpener;
  storage: Pick<Storage, 'getItem' | 'setItem'> | null;
  /** localStorage key for this integration and agent, where the window's name is kept; null while the agent is not known */
  storageKey: () => string | null;
  /** the ticket named the window: remember the name for this agent (once the agent is known) */
  onNamed: (windowName: string) => void;
  /** the call window this page already holds (opened earlier), tried before any lookup by name */
  heldWindow?: Window | null;
  windowMode: OpenedMode;
  /** the agent's engine is live according to the last snapshot */
  engineLive: boolean;
  /** when the window this widget sent on its way (LaunchTracker) was sent; null when none is */
  launchedAt: number | null;
  /** that window (null when none is, or it went through the 'Open in new tab' link) */
  launchingWindow: Window | null;
  now: number;
  /** when this widget last fell back to the focus command (ms), and how to record it */
  fallbackAt: number;
  onFallback: (at: number) => void;
  ticket: () => Promise<LaunchTicket>;
  /**
   * The launch no longer stands by the time its ticket comes (a logout, the widget detached, a
   * session of another agent): the window it opened closes, and nothing is offered or said.
   */
  cancelled: () => boolean;
  /** sends the `focus` widget command (fire and forget) */
  focusCommand: () => void;
  /** a window is on its way (null: the link was offered instead) */
  onLaunching: (win: Window) => void;
  /** the call window this page holds a handle on (opened or found), for window messages */
  onWindow?: (win: Window) => void;
  onBlocked: (ticket: LaunchTicket) => void;
  onError: (error: SdkError) => void;
}

/** The window modes this SDK opens; frame-shell and extension are not built yet (README). */
export type OpenedMode = 'popup' | 'tab';

/**
 * How enableCalls() opens the call window: init()'s windowMode, else the integration's setting
 * "Call window opens as" (Policy.widget.window_mode), else a popup. A mode this SDK cannot open yet
 * (frame-shell, extension) opens a popup, and `warn` is told which, rather than opening something
 * else without a word.
 */
export function openedMode(option: string | undefined, setting: WindowMode | undefined, warn: (message: string) => void): OpenedMode {
  const wanted = option ?? setting ?? 'popup';
  if (wanted === 'popup' || wanted === 'tab') return wanted;
  warn(`Click2Call: the call window cannot open as '${wanted}' in this version (${option !== undefined ? "init()'s windowMode" : "the integration's setting"}); it opens as a popup.`);
  return 'popup';
}

/** A second enableCalls() this soon after a focus-command fallback opens a window after all. */
export const FOCUS_FALLBACK_MS = 10_000;
/**
 * ...but not sooner than this: a click that quick is the same gesture again (a double-click), not
 * the agent's answer to "open elsewhere", and opening a window then would take the engine from the
 * live window without the agent having asked.
 */
export const SAME_GESTURE_MS = 1000;

/**
 * A call window given a ticket this long ago whose engine is still not live did not pair (its
 * ticket refused, say): another enableCalls() gives it another. Sooner, it is only brought forward.
 */
export const PAIRING_WAIT_MS = 10_000;

const POPUP_FEATURES = 'popup,width=420,height=680';

function read(storage: LaunchDeps['storage'], key: string | null): string | null {
  try {
    return key && storage ? storage.getItem(key) : null;
  } catch {
    return null; // storage disabled
  }
}

/** A window that has left about:blank (cross-origin access throws) is a live call window. */
function isCallWindow(win: Window): boolean {
  try {
    return win.location.href !== 'about:blank';
  } catch {
    return true;
  }
}

/** Opens or finds the call window; true when a window was opened or found. */
export function launchCallWindow(d: LaunchDeps): boolean {
  const features = d.windowMode === 'popup' ? POPUP_FEATURES : undefined;
  const known = read(d.storage, d.storageKey());
  // The window this page opened, still open and past its blank page: it needs no name to be found.
  const held = d.heldWindow && !d.heldWindow.closed && isCallWindow(d.heldWindow) ? d.heldWindow : null;
  // A live window this page cannot reach gets the focus command instead. Asked again soon after,
  // the agent does not see it: open one here then (it replaces the other).
  const fallBack = d.engineLive && d.now - d.fallbackAt > FOCUS_FALLBACK_MS;
  const focusElsewhere = () => {
    d.onFallback(d.now);
    d.focusCommand();
    return true;
  };
  if (d.engineLive && d.now - d.fallbackAt < SAME_GESTURE_MS) return true;
  // The window on its way, before its ticket named it (a double click, a slow ticket fetch): a
  // lookup by name would not find it and open a second one, which would then take the engine.
  const launching = d.launchingWindow;
  if (launching && !launching.closed && d.launchedAt !== null && d.now - d.launchedAt < PAIRING_WAIT_MS) {
    launching.focus();
    return true;
  }
  // Not named here: opened from another origin, profile, or before storage knew it.
  if (!held && !known && fallBack) return focusElsewhere();
  let win: Window | null = held;
  try {
    win ??= d.open('', known ?? '_blank', features);
  } catch {
    win = null;
  }
  const found = win !== null && isCallWindow(win);
  if (!found && known && fallBack) {
    // The name opened a new, blank window (or none: a blocker refuses new windows, not named
    // ones that exist): the live one belongs to a tab this one cannot reach by name (browsers look
    // names up only among windows related by opening). No replacement, and no link to one.
    win?.close();
    return focusElsewhere();
  }
  if (win) d.onWindow?.(win);
  if (found) {
    win!.focus();
    if (d.engineLive) d.focusCommand();
    // A call window whose engine is not live is either still pairing (a launch under way) or has
    // stopped (reloaded, its ticket refused, its engine ended) and asks to be opened again from
    // the widget: it is given a new ticket, which it takes from its fragment (window/src/main.ts).
    if (d.engineLive || (d.launchedAt !== null && d.now - d.launchedAt < PAIRING_WAIT_MS)) return true;
  } else if (win) {
    placeholder(win);
  }
  if (win) d.onLaunching(win);
  d.ticket().then(
    (ticket) => {
      if (d.cancelled()) return void (!found && win?.close());
      d.onNamed(ticket.window_name);
      if (!win) return d.onBlocked(ticket);
      if (win.closed) return;
      if (!found) win.name = ticket.window_name; // a found window has it (and is another origin's)
      win.location.replace(ticket.window_url);
    },
    (error: unknown) => {
      if (!found) win?.close(); // the agent's own window stays
      if (d.cancelled()) return;
      d.onError(error instanceof SdkError ? error : new SdkError('unreachable', String(error)));
    },
  );
  return win !== null;
}

function placeholder(win: Window): void {
  try {
    win.document.title = 'Click-to-call';
    win.document.body.textContent = '…';
  } catch {
    /* not ours to write */
  }
}

/** How long an opened window may take to become ready before the widget stops saying 'enabling'. */
export const LAUNCH_WAIT_MS = 60_000;

/**
 * Once the window has paired (its engine is live), how long it may still take to become ready:
 * the browser's microphone prompt, then the voice line, take a few seconds. A window still not
 * ready after that is waiting on the agent (a microphone blocked, a prompt left open), and the
 * widget says what it waits for (no_mic) instead of "Opening the call window…" for a minute.
 */
export const PAIRED_WAIT_MS = 10_000;

/** Whether a window enableCalls() opened is still on its way: not ready yet, not closed, not too late. */
export class LaunchTracker {
  private on = false;
  private since = 0;
  private win: Window | null = null;
  private timer: TimerHandle | undefined;
  private pairedTimer: TimerHandle | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly onTimeout: () => void,
  ) {}

  /** A window is on its way (null: through the 'Open in new tab' link, which gives no handle). */
  start(win: Window | null): void {
    this.stop();
    this.on = true;
    this.since = this.clock.now();
    this.win = win;
    this.timer = this.clock.after(LAUNCH_WAIT_MS, () => {
      this.stop();
      this.onTimeout();
    });
  }

  stop(): void {
    this.on = false;
    this.win = null;
    this.clock.cancel(this.timer);
    this.clock.cancel(this.pairedTimer);
    this.pairedTimer = undefined;
  }

  /** The window on its way has paired (its engine is live, not ready yet): it has PAIRED_WAIT_MS more. */
  paired(): void {
    if (!this.on || this.pairedTimer !== undefined) return;
    this.pairedTimer = this.clock.after(PAIRED_WAIT_MS, () => {
      this.stop();
      this.onTimeout();
    });
  }

  /** The window on its way (null when none is, or it went through the link). */
  window(): Window | null {
    return this.isActive() ? this.win : null;
  }

  /** When the window on its way was sent (null when none is). */
  startedAt(): number | null {
    return this.isActive() ? this.since : null;
  }

  /** True while the window is on its way; a window closed by the agent ends it. */
  isActive(): boolean {
    if (this.on && this.win?.closed) this.stop();
    return this.on;
  }
}
