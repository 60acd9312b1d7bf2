/**
 * The call window's view inside #c2c-window. It renders a ViewModel and nothing else; every
 * element a browser test needs has a data-testid (w-state, w-agent, w-call-status, w-call-name,
 * w-call-number, w-timer, w-hangup, w-mute, w-message, …). The call's display is shown exactly as
 * the server sent it (a hidden number stays hidden); the timer runs from the server's numbers.
 */
import type { CallStatus, Display } from '../../shared/types.js';
import { ConsentGuard } from './consent-guard.js';
import { CALL_STATUS_LABELS, LANGUAGE, MESSAGES, STATE_LABELS, UI_TEXTS, type WindowState } from './messages.js';
import { WINDOW_STYLE } from './style.js';
import { elapsedSeconds, formatElapsed, type TimedCall } from './timer.js';

export interface CallViewModel {
  direction: 'outbound' | 'inbound';
  /** the server's status, or `ended` once the window lost sight of the call */
  status: CallStatus | 'ended';
  display: Display;
  timing: TimedCall;
  receivedAt: number;
  live: boolean;
}

export interface ViewModel {
  state: WindowState;
  agent: string | null;
  call: CallViewModel | null;
  hangupBusy: boolean;
  /** an incoming call rings here that the device has not taken yet */
  answerable: boolean;
  answerBusy: boolean;
  muteAllowed: boolean;
  muted: boolean;
  message: { text: string; tone: 'info' | 'warn' | 'error' } | null;
  /** label of the Try again button, when there is something to retry */
  retry: string | null;
  /** how the window hears from the service: live socket, heartbeats only, or not at all */
  connection: 'live' | 'polling' | null;
  /** the question asked before carrying an agent's calls the first time (consent.ts), else null */
  consent: string | null;
  /** enabling with the microphone granted: what it waits for is the voice line (its script, its token) */
  voiceStarting?: boolean;
}

/** The states in which the window carries, or is about to carry, calls: closing it would drop them. */
const CARRYING: ReadonlySet<WindowState> = new Set(['enabling', 'no_mic', 'ready', 'call']);

/** What the state element says. */
function stateLabel(model: ViewModel): string {
  return model.state === 'enabling' && model.voiceStarting ? UI_TEXTS.voiceStarting : STATE_LABELS[model.state];
}

export interface ViewActions {
  /** an incoming call ringing here: the agent need not have the CRM open to take it */
  answer(): void;
  hangup(): void;
  toggleMute(): void;
  retry(): void;
  /** the answer to the consent question */
  consent(yes: boolean): void;
}


/** Hidden itself or inside something hidden. */
function hiddenIn(node: HTMLElement): boolean {
  for (let at: HTMLElement | null = node; at; at = at.parentElement) if (at.hidden) return true;
  return false;
}

/** Written only when it changes: a live region speaks on every write. */
function setIfChanged(node: HTMLElement, text: string): void {
  if (node.textContent !== text) node.textContent = text;
}

function el<K extends keyof HTMLElementTagNameMap>(doc: Document, tag: K, testid: string | null, parent: HTMLElement, text = ''): HTMLElementTagNameMap[K] {
  const node = doc.createElement(tag);
  if (testid) node.dataset.testid = testid;
  if (text) node.textContent = text;
  parent.appendChild(node);
  return node;
}

function show(node: HTMLElement, text: string | null): void {
  node.hidden = text === null || text === '';
  node.textContent = text ?? '';
}

/** What the window says of itself for screen readers: its state, its call's status, a call ringing. */
function announcement(model: ViewModel): string {
  const call = model.call;
  if (!call) return stateLabel(model);
  if (call.live && call.status === 'incoming') {
    const who = call.display.name ?? call.display.number;
    return who ? UI_TEXTS.incomingFrom.replace('{who}', () => who) : UI_TEXTS.incoming;
  }
  return `${stateLabel(model)}. ${CALL_STATUS_LABELS[call.status]}`;
}

export class WindowView {
  readonly #doc: Document;
  readonly #now: () => number;
  readonly #nodes;
  #model: ViewModel | null = null;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(root: HTMLElement, actions: ViewActions, now: () => number = Date.now) {
    const doc = root.ownerDocument;
    this.#doc = doc;
    this.#now = now;
    if (!doc.getElementById('c2c-window-style')) {
      const style = el(doc, 'style', null, doc.head, WINDOW_STYLE);
      style.id = 'c2c-window-style';
    }
    root.replaceChildren();
    const header = el(doc, 'header', null, root);
    const agent = el(doc, 'span', 'w-agent', header);
    const connection = el(doc, 'span', 'w-connection', header);
    // Not a live region itself: what it says is announced, with the call's status, by w-heard.
    const state = el(doc, 'div', 'w-state', root);
    // focusable by script: where the focus goes when the control that had it goes (Hang up once the call ended)
    state.tabIndex = -1;
    const call = el(doc, 'section', 'w-call', root);
    call.className = 'c2c-call';
    const heading = el(doc, 'div', 'w-call-direction', call);
    heading.className = 'c2c-note';
    const name = el(doc, 'div', 'w-call-name', call);
    const company = el(doc, 'div', 'w-call-company', call);
    const number = el(doc, 'div', 'w-call-number', call);
    const line = el(doc, 'div', null, call);
    const status = el(doc, 'span', 'w-call-status', line);
    const timer = el(doc, 'span', 'w-timer', line);
    const buttons = el(doc, 'div', null, call);
    buttons.className = 'c2c-actions';
    const answer = el(doc, 'button', 'w-answer', buttons);
    const mute = el(doc, 'button', 'w-mute', buttons);
    const hangup = el(doc, 'button', 'w-hangup', buttons);
    const consent = el(doc, 'section', 'w-consent', root);
    const question = el(doc, 'p', 'w-consent-question', consent);
    const answers = el(doc, 'div', null, consent);
    answers.className = 'c2c-actions';
    const yes = el(doc, 'button', 'w-consent-yes', answers);
    const no = el(doc, 'button', 'w-consent-no', answers);
    const message = el(doc, 'p', 'w-message', root);
    // What the message says is read out from regions that are always there (a live region that
    // enters the page already filled is skipped by screen readers): errors at once, the rest politely.
    const said = el(doc, 'div', 'w-said', root);
    said.className = 'c2c-sr';
    said.setAttribute('role', 'status');
    // the window's state and its call's status, spoken when either changes: a call that connects,
    // how it ended (busy, no answer), a call ringing
    const heard = el(doc, 'div', 'w-heard', root);
    heard.className = 'c2c-sr';
    heard.setAttribute('role', 'status');
    const alerted = el(doc, 'div', 'w-alert', root);
    alerted.className = 'c2c-sr';
    alerted.setAttribute('role', 'alert');
    const retry = el(doc, 'button', 'w-retry', root);
    const note = el(doc, 'p', 'w-keep-open', root);
    note.className = 'c2c-note';
    for (const button of [answer, mute, hangup, retry, yes, no]) button.type = 'button';
    answer.addEventListener('click', () => actions.answer());
    yes.addEventListener('click', () => actions.consent(true));
    no.addEventListener('click', () => actions.consent(false));
    hangup.addEventListener('click', () => actions.hangup());
    mute.addEventListener('click', () => actions.toggleMute());
    retry.addEventListener('click', () => actions.retry());
    // focusable by script: the question is where a keyboard or screen-reader user is taken when it comes
    question.tabIndex = -1;
    this.#nodes = { agent, connection, state, call, heading, name, company, number, status, timer, answer, mute, hangup, consent, question, yes, no, message, said, heard, alerted, retry, note };
    const win = doc.defaultView;
    this.#consentGuard = win ? new ConsentGuard(yes, { win, doc }) : null;
  }

  /** the consent "yes" takes clicks only once the question has been seen (consent-guard.ts) */
  readonly #consentGuard: ConsentGuard | null;

  render(model: ViewModel): void {
    this.#model = model;
    const n = this.#nodes;
    show(n.agent, model.agent);
    // The language may change once the window has paired (useLanguage): every text is set on each render.
    this.#doc.documentElement.lang = LANGUAGE;
    n.hangup.textContent = UI_TEXTS.hangup;
    n.answer.textContent = UI_TEXTS.answer;
    n.note.textContent = MESSAGES.keepOpen;
    // not beside "You can close it" (closed, declined) nor while pairing: nothing to keep open for yet
    n.note.hidden = !CARRYING.has(model.state) || model.consent !== null;
    show(n.connection, model.connection === 'live' ? UI_TEXTS.live : model.connection === 'polling' ? UI_TEXTS.polling : null);
    setIfChanged(n.state, stateLabel(model));
    n.state.dataset.state = model.state;
    const call = model.call;
    setIfChanged(n.heard, announcement(model));
    n.call.hidden = call === null;
    if (call) {
      n.heading.textContent = call.direction === 'inbound' ? UI_TEXTS.incoming : UI_TEXTS.outgoing;
      show(n.name, call.display.name);
      show(n.company, call.display.company);
      show(n.number, call.display.number);
      n.status.textContent = CALL_STATUS_LABELS[call.status];
      n.status.dataset.status = call.status;
      n.hangup.hidden = !call.live;
      n.answer.hidden = !model.answerable;
      n.answer.setAttribute('aria-disabled', String(model.answerBusy));
      // Busy, it says so rather than being disabled: a disabled control loses the focus to the page
      // (the focus fixup rule), and a keyboard user who pressed it would lose their place. A press
      // meanwhile does nothing (Engine.hangup ignores it while one is under way).
      n.hangup.setAttribute('aria-disabled', String(model.hangupBusy));
      n.mute.hidden = !(call.live && model.muteAllowed && call.status === 'connected');
      // The label says what a press does (Mute, Unmute), and is the button's name: no pressed
      // state beside it, which would read "Unmute, pressed".
      n.mute.textContent = model.muted ? UI_TEXTS.unmute : UI_TEXTS.mute;
      n.mute.dataset.muted = String(model.muted);
    }
    const newQuestion = model.consent !== null && n.consent.hidden;
    n.consent.hidden = model.consent === null;
    this.#consentGuard?.asking(model.consent !== null);
    n.question.textContent = model.consent ?? '';
    n.yes.textContent = UI_TEXTS.consentYes;
    n.no.textContent = UI_TEXTS.consentNo;
    n.message.hidden = model.message === null;
    n.message.textContent = model.message?.text ?? '';
    n.message.dataset.tone = model.message?.tone ?? '';
    const urgent = model.message?.tone === 'error';
    setIfChanged(n.alerted, urgent ? model.message!.text : '');
    setIfChanged(n.said, urgent ? '' : (model.message?.text ?? ''));
    show(n.retry, model.retry);
    if (newQuestion) n.question.focus();
    // a control that had the focus and is now hidden would drop it to the page's body
    const focused = this.#doc.activeElement as HTMLElement | null;
    if (focused && focused !== n.state && n.state.parentElement?.contains(focused) && hiddenIn(focused)) n.state.focus();
    this.#doc.title = `${stateLabel(model)} · ${UI_TEXTS.title}`;
    this.#tick();
    const running = call !== null && call.live && call.timing.answered_at !== null;
    if (running && this.#timer === undefined) this.#timer = setInterval(() => this.#tick(), 1000);
    if (!running && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  destroy(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    const call = this.#model?.call;
    const seconds = call ? elapsedSeconds(call.timing, call.receivedAt, this.#now()) : null;
    show(this.#nodes.timer, seconds === null ? null : formatElapsed(seconds));
  }
}
