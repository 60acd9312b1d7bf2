/**
 * The widget panel: a Shadow DOM (mode open, so tests reach it through shadowRoot) holding real
 * buttons with stable data-testids, built once and updated in place so keyboard focus survives
 * every snapshot. It shows only what the policy allows; three live regions announce state changes
 * (polite), messages (status) and incoming calls (assertive).
 */
import { isLive, type Call, type Engine, type Policy } from '../contract.js';
import type { WidgetStateName } from '../machine.js';
import { formatDuration } from '../snapshots.js';
import { STYLES } from './styles.js';
import { langOf, textsFor, type Texts } from './texts.js';

export interface ViewModel {
  state: WidgetStateName;
  call: Call | null;
  engine: Engine | null;
  policy: Policy | null;
  /** a hangup or decline (ending) or an answer (answering) is on its way */
  pending: 'ending' | 'answering' | null;
  /** the server's duration of the call, seconds */
  duration: number | null;
  message: string | null;
  /** which saying the message is: a new one is announced even when its words are the last one's */
  said: number;
  openTab: { url: string; name: string } | null;
}

export interface WidgetHandlers {
  enable(): void;
  answer(): void;
  decline(): void;
  hangup(): void;
  mute(muted: boolean): void;
  digit(digit: string): void;
  available(available: boolean): void;
  /** the agent followed the 'Open in new tab' link; false: not to be followed (the session is over) */
  openTab(): boolean;
}

export type Position = 'bottom-right' | 'bottom-left' | 'top-right' | 'top-left';

const DIGITS = ['1', '2', '3', '4', '5', '6', '7', '8', '9', '*', '0', '#'];
const digitId = (d: string) => (d === '*' ? 'star' : d === '#' ? 'hash' : d);

function el<K extends keyof HTMLElementTagNameMap>(tag: K, testid: string, cls = '', parent?: HTMLElement): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  node.setAttribute('data-testid', testid);
  if (cls) node.className = cls;
  parent?.appendChild(node);
  return node;
}

/**
 * One constructed sheet per document, made for its first widget: a sheet can be adopted only in
 * the document whose window constructed it, so a widget in a same-origin frame's element (a
 * container there) gets that frame's own.
 */
const sheets = new WeakMap<Document, CSSStyleSheet>();

/**
 * Gives the shadow root the widget's CSS as a constructed style sheet: the page's Content Security
 * Policy governs <style> elements (a strict `style-src` without 'unsafe-inline' refuses ours) but
 * not constructed sheets, so integrators need not weaken their policy for the widget. A browser
 * without them (Safari before 16.4, Firefox before 101) gets a <style> element, which such a
 * policy refuses: the widget then works unstyled (docs/sdk.md, "Content Security Policy").
 */
function adoptStyles(root: ShadowRoot, doc: Document): void {
  const Sheet = doc.defaultView?.CSSStyleSheet;
  if ('adoptedStyleSheets' in root && typeof Sheet === 'function' && 'replaceSync' in Sheet.prototype) {
    let sheet = sheets.get(doc);
    if (!sheet) {
      sheet = new Sheet();
      sheet.replaceSync(STYLES);
      sheets.set(doc, sheet);
    }
    root.adoptedStyleSheets = [sheet];
    return;
  }
  const style = doc.createElement('style');
  style.textContent = STYLES;
  root.appendChild(style);
}

export class Widget {
  readonly host: HTMLElement;
  readonly root: ShadowRoot;
  readonly texts: Texts;
  private readonly n: Record<string, HTMLElement> = {};
  private announcedState: string | null = null;
  private said = 0;
  private announcedIncoming: string | null = null;
  private keypadOpen = false;
  /** the call the keypad was last opened for (it closes when the call changes) */
  private keypadCall: string | null = null;

  constructor(container: HTMLElement, position: Position, language: string | undefined, private readonly h: WidgetHandlers, fixed: boolean) {
    this.texts = textsFor(language);
    const t = this.texts;
    // made in the container's own document (a same-origin frame's, maybe), where its style sheet must be made too
    const doc = container.ownerDocument;
    this.host = doc.createElement('c2c-widget');
    this.host.setAttribute('data-testid', 'c2c-host');
    if (fixed) {
      const [v, side] = position.split('-');
      this.host.style.cssText = `position:fixed;z-index:2147483000;${v}:16px;${side}:16px;display:block`;
    } else this.host.style.cssText = 'display:block';
    this.root = this.host.attachShadow({ mode: 'open' });
    adoptStyles(this.root, doc);

    const n = this.n;
    const panel = (n.panel = el('section', 'c2c-widget', 'p'));
    panel.setAttribute('aria-label', t.title);
    // focusable by script only: where focus goes when the control that had it goes away
    panel.tabIndex = -1;
    panel.lang = langOf(language);
    this.root.appendChild(panel);
    n.state = el('p', 'c2c-state', 's', panel);
    const call = (n.call = el('div', 'c2c-call', '', panel));
    n.name = el('p', 'c2c-call-name', 'n', call);
    n.company = el('p', 'c2c-call-company', '', call);
    n.number = el('p', 'c2c-call-number', '', call);
    n.status = el('p', 'c2c-call-status', '', call);
    n.timer = el('p', 'c2c-timer', 't', call);
    n.timer.setAttribute('role', 'timer');
    n.message = el('p', 'c2c-message', 'm', panel);
    const tab = (n.openTab = el('a', 'c2c-open-tab', 'l', panel));
    tab.textContent = t.openTab;
    tab.addEventListener('click', (event) => {
      if (!this.h.openTab()) event.preventDefault();
    });

    const row = (n.actions = el('div', 'c2c-actions', 'r', panel));
    const button = (testid: string, label: string, cls: string, onClick: () => void) => {
      const b = el('button', testid, cls, row);
      b.type = 'button';
      b.textContent = label;
      b.addEventListener('click', onClick);
      return (n[testid] = b);
    };
    button('c2c-enable', t.enable, 'g', () => this.h.enable());
    button('c2c-answer', t.answer, 'g', () => this.h.answer());
    button('c2c-decline', t.decline, 'd', () => this.h.decline());
    button('c2c-hangup', t.hangup, 'd', () => this.h.hangup());
    button('c2c-mute', t.mute, '', () => this.h.mute(n['c2c-mute']!.dataset.muted !== 'true'));
    const dtmf = button('c2c-dtmf', t.keypad, '', () => {
      this.keypadOpen = !this.keypadOpen;
      dtmf.setAttribute('aria-expanded', String(this.keypadOpen));
      n.keypad!.hidden = !this.keypadOpen;
    });
    button('c2c-available', t.available, '', () => this.h.available(n['c2c-available']!.getAttribute('aria-pressed') !== 'true'));

    const keypad = (n.keypad = el('div', 'c2c-keypad', 'k', panel));
    keypad.id = 'c2c-keypad';
    dtmf.setAttribute('aria-controls', keypad.id);
    dtmf.setAttribute('aria-expanded', 'false');
    for (const d of DIGITS) {
      const b = el('button', `c2c-digit-${digitId(d)}`, '', keypad);
      b.type = 'button';
      b.textContent = d;
      b.addEventListener('click', () => this.h.digit(d));
    }
    // Refusals and outcomes ("The hangup could not be confirmed…") are read out as they appear:
    // from a status region that is always there, since screen readers skip a live region that
    // enters the page already filled (the shown message is hidden while there is none).
    n.said = el('div', 'c2c-said', 'sr', panel);
    n.said.setAttribute('role', 'status');
    n.live = el('div', 'c2c-live', 'sr', panel);
    n.live.setAttribute('aria-live', 'polite');
    n.alert = el('div', 'c2c-alert', 'sr', panel);
    n.alert.setAttribute('role', 'alert');
    container.appendChild(this.host);
  }

  /** Shows the view model; only changed nodes are touched. */
  render(v: ViewModel): void {
    const { n, texts: t } = this;
    // A session that is over shows no call and offers no control: each would only be refused.
    const over = v.state === 'unauthorized' || v.state === 'error';
    const live = isLive(v.call) && !over ? v.call : null;
    const controls = v.policy?.controls ?? [];
    // An orphaned call is held by no window: mute and the keypad would act on nothing (it can only be ended).
    const connected = live?.status === 'connected' && !live.orphaned && v.pending !== 'ending';
    // An orphaned call rings nowhere: it can only be ended (Hang up), not answered.
    const ringingIn = live?.status === 'incoming' && !live.orphaned;
    const incoming = ringingIn && !v.pending;
    const engineLive = !!v.engine?.live;

    n.panel!.dataset.state = v.state;
    n.state!.dataset.state = v.state;
    // What the state and the call say on screen is what the live region speaks (below).
    const stateText = v.state === 'no_mic' && v.engine?.mic_ready ? t.voiceNotReady : t.states[v.state];
    const callText = live ? (v.pending ? t[v.pending] : live.orphaned ? t.orphaned : t.calls[live.status]) : null;
    setText(n.state!, stateText);

    show(n.call!, !!live);
    if (live) {
      const d = live.display;
      setText(n.name!, d.name ?? d.contact_reference ?? '');
      setText(n.company!, d.company ?? '');
      setText(n.number!, d.number ?? ''); // already masked or null: shown as given
      show(n.company!, !!d.company);
      show(n.number!, !!d.number);
      setText(n.status!, callText!);
    }
    const timer = live?.status === 'connected' && v.duration !== null ? formatDuration(v.duration) : null;
    show(n.timer!, timer !== null);
    setText(n.timer!, timer ?? '');

    show(n.message!, !!v.message);
    setText(n.message!, v.message ?? '');
    // A refusal said again (Hang up failing twice alike) must be heard again: writing the text anew
    // replaces the status region's text node, which screen readers announce even for the same words.
    if (v.said !== this.said) {
      this.said = v.said;
      n.said!.textContent = v.message ?? '';
    } else setText(n.said!, v.message ?? '');
    const tab = n.openTab as HTMLAnchorElement;
    show(tab, !!v.openTab);
    if (v.openTab && tab.href !== v.openTab.url) {
      tab.href = v.openTab.url;
      tab.target = v.openTab.name;
    }

    show(n['c2c-enable']!, v.state === 'offline' || v.state === 'no_mic');
    show(n['c2c-answer']!, incoming);
    show(n['c2c-decline']!, incoming);
    // Not while a call rings in, even once Answer was clicked: Hang up would take Answer's place in
    // the row, and the second click of a double-click on Answer would drop the caller. It shows
    // once the answer is confirmed (connected); an answer that fails brings Answer and Decline back.
    show(n['c2c-hangup']!, !!live && !ringingIn && v.pending !== 'ending');
    const muted = !!v.engine?.muted;
    const mute = n['c2c-mute']!;
    // Unmute stays while muted, whatever the policy now says (an agent is never left unheard)
    show(mute, connected && (controls.includes('mute') || muted));
    mute.dataset.muted = String(muted);
    setText(mute, muted ? t.unmute : t.mute);
    // The keypad opens for the call it was opened on, not by itself on the next one.
    if ((live?.call_id ?? null) !== this.keypadCall) {
      this.keypadCall = live?.call_id ?? null;
      this.keypadOpen = false;
      n['c2c-dtmf']!.setAttribute('aria-expanded', 'false');
    }
    const dtmf = connected && controls.includes('dtmf');
    show(n['c2c-dtmf']!, dtmf);
    show(n.keypad!, dtmf && this.keypadOpen);
    const available = n['c2c-available']!;
    show(available, engineLive && !over && !!v.policy?.inbound && v.state !== 'reconnecting');
    available.setAttribute('aria-pressed', String(!!v.engine?.available));

    // A control that had the focus and is now hidden (Answer once answered, Hang up once the call
    // ended) would drop it to the page: keyboard and screen-reader users would lose their place.
    // It goes to the panel, never to another control: the one in its place may undo what was just
    // done (Hang up where Answer was), and a held or repeated Enter would press it.
    const focused = this.root.activeElement as HTMLElement | null;
    if (focused && focused !== n.panel && isHidden(focused)) n.panel!.focus();

    // Announcements: each change of what the state and the call say once (a call the window lost,
    // "Ending the call…", the voice line not ready), each incoming call once.
    const announced = callText ? `${stateText}. ${callText}` : stateText;
    if (announced !== this.announcedState) {
      this.announcedState = announced;
      setText(n.live!, announced);
    }
    if (incoming && live.call_id !== this.announcedIncoming) {
      this.announcedIncoming = live.call_id;
      const who = live.display.name ?? live.display.number ?? '';
      // Written even when the text is the same as the last call's (a hidden caller twice): the new
      // text node is what makes the alert speak again.
      n.alert!.textContent = who ? `${t.incoming}: ${who}` : t.incoming;
    }
  }

  destroy(): void {
    this.host.remove();
  }
}

function setText(node: HTMLElement, text: string): void {
  if (node.textContent !== text) node.textContent = text;
}

/** Hidden itself or inside something hidden (a digit of the closed keypad). */
function isHidden(node: HTMLElement): boolean {
  for (let at: HTMLElement | null = node; at; at = at.parentElement) if (at.hidden) return true;
  return false;
}

function show(node: HTMLElement, visible: boolean): void {
  if (node.hidden === visible) node.hidden = !visible;
}
