/**
 * Entry of click2call-window.js, loaded by the call window page ({site_url}/click2call/window).
 * It reads the boot data and the launch ticket (then strips the fragment), pairs or restores the
 * stored pairing, and runs the engine with the real browser pieces: fetch, sessionStorage, the
 * heartbeat Worker, socket.io-client, getUserMedia and the chosen voice driver.
 */
import { io } from 'socket.io-client';
import { EngineApi, type Paired } from './api.js';
import { readBoot, takeFragment, type Boot } from './boot.js';
import { loadTwilioDriver } from './drivers/load-twilio.js';
import { SimulatedDriver } from './drivers/simulated.js';
import type { VoiceDriver } from './drivers/types.js';
import { Engine, type EngineDeps } from './engine.js';
import { MESSAGES, UI_TEXTS, useLanguage, type WindowState } from './messages.js';
import { askMicrophone, watchMicDevices, watchMicPermission } from './mic.js';
import { consented, keepConsent } from './consent.js';
import { tabLocks } from './tab-lock.js';
import { establish, loadPairing, openerLanguage } from './session.js';
import { EngineSocket, type EngineSocketIo } from './socket.js';
import { createTicker } from './ticker.js';
import { WindowView, type ViewModel } from './ui.js';

function sessionStore(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage disabled: pairing lasts as long as the page
  }
}

/** Warns before unload only while a call is held (a permanent listener would also cost the bfcache). */
function unloadGuard(): (on: boolean) => void {
  let active = false;
  const warn = (event: BeforeUnloadEvent) => {
    event.preventDefault();
    event.returnValue = '';
  };
  return (on) => {
    if (on === active) return;
    active = on;
    if (on) window.addEventListener('beforeunload', warn);
    else window.removeEventListener('beforeunload', warn);
  };
}

function notPaired(state: WindowState, message: string | null, retry: string | null): ViewModel {
  return { state, agent: null, call: null, hangupBusy: false, answerable: false, answerBusy: false, muteAllowed: false, muted: false, message: message ? { text: message, tone: 'error' } : null, retry, connection: null, consent: null };
}

/**
 * The consent question for a pairing (consent.ts): whose calls, by name and identifier, and for
 * which integration, by the name the service's operator gave it (not the opener's to choose): an
 * agent asked from another product's page than the CRM they use can tell.
 */
function asking(paired: Paired): ViewModel {
  const agent = `${paired.agent.name} (${paired.agent.identifier})`;
  // a node older than the integration's name in the pair answer (a rolling upgrade) sends none
  const integration = paired.integration_name || MESSAGES.yourCrm;
  const question = MESSAGES.consentQuestion.replace('{agent}', () => agent).replaceAll('{integration}', () => integration);
  return { ...notPaired('confirm', null, null), agent: paired.agent.name, consent: question };
}

function localStore(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null; // storage disabled: the window asks for consent every time
  }
}

async function loadDriver(paired: Parameters<EngineDeps['loadDriver']>[0]): Promise<VoiceDriver> {
  if (paired.voice_provider !== 'twilio') return new SimulatedDriver();
  const factory = await loadTwilioDriver(document);
  return factory.create({ register: paired.policy.inbound });
}

async function run(): Promise<void> {
  const root = document.getElementById('c2c-window');
  if (!root) return;
  let engine: Engine | null = null;
  let retry = () => {};
  /** answers the consent question being asked (consent.ts) */
  let answer: (yes: boolean) => void = () => {};
  const view = new WindowView(root, {
    answer: () => void engine?.answer(),
    hangup: () => void engine?.hangup(),
    toggleMute: () => engine?.toggleMute(),
    retry: () => retry(),
    consent: (yes) => answer(yes),
  });
  // Read and strip the fragment before anything else can be slow or fail (a broken boot block
  // included): the ticket must not stay in the address bar or the history.
  const opened = takeFragment(window.location, window.history);
  const storage = sessionStore();
  /** the language of the widget that opened the window, if it said (kept for this tab's reloads) */
  let widgetLanguage = openerLanguage(storage, opened.lang);
  // Until it has paired, the window speaks the widget's language, else its browser's (a broken
  // boot block's message included).
  useLanguage(widgetLanguage ?? navigator.language);
  let boot: Boot;
  try {
    boot = readBoot(document);
  } catch {
    return view.render(notPaired('error', MESSAGES.bootFailed, null));
  }
  let ticket = opened.ticket;
  const guard = unloadGuard();
  /** one tab per engine (tab-lock.ts) */
  const holdEngine = tabLocks(navigator.locks);
  let pairing = false;
  /** a ticket that arrived while a pairing was under way: used if that pairing fails */
  let waiting: string | null = null;
  let stopShowing = (): unknown => undefined;

  /**
   * Whether to carry a new pairing's calls: yes for an agent this browser already said yes to,
   * else the person in front of the window is asked (consent.ts). A ticket arriving meanwhile
   * waits, as during the pairing itself; the window closed meanwhile closes the engine it paired.
   */
  const allowed = async (api: EngineApi, paired: Paired): Promise<boolean> => {
    // the integration's widget language (the widget's own default) from here on, unless the widget said
    useLanguage(widgetLanguage ?? operatorLanguage(paired) ?? navigator.language);
    if (consented(localStore(), paired)) return true;
    unloadWhileAsking = () => api.closeOnUnload();
    const yes = await new Promise<boolean>((resolve) => {
      answer = resolve;
      view.render(asking(paired));
    });
    answer = () => {};
    unloadWhileAsking = () => {};
    if (yes) keepConsent(localStore(), paired);
    return yes;
  };
  /** closes the engine a pairing made while its consent question is on screen */
  let unloadWhileAsking = () => {};

  const attempt = async (): Promise<void> => {
    pairing = true;
    // Each pairing has its own client: the token a stopped engine held is never replaced under it.
    const api = new EngineApi(boot.apiBaseUrl);
    // A tab duplicated from one running an engine carries its stored pairing: not restored here
    // while that tab runs it (tab-lock.ts), not even probed (a report from here would flip its state).
    const stored = ticket ? null : loadPairing(storage, boot.apiBaseUrl);
    if (stored && !(await holdEngine(stored.engine.id))) {
      pairing = false;
      // Try again: the other tab may have been closed since (or a browser kept a lock past a reload)
      retry = () => void attempt();
      return view.render(notPaired('error', MESSAGES.openInAnotherTab, UI_TEXTS.tryAgain));
    }
    view.render(notPaired('pairing', null, null));
    const result = await establish(api, storage, ticket, boot.voiceProvider === 'simulated', (paired) => allowed(api, paired)).catch(
      () => ({ ok: false, reason: 'unreachable', message: MESSAGES.unreachable, retry: true }) as const,
    );
    pairing = false;
    if (!result.ok) {
      if (waiting) {
        [ticket, waiting] = [waiting, null];
        return attempt();
      }
      retry = result.retry ? () => void attempt() : () => {};
      if (result.reason === 'declined') return view.render({ ...notPaired('closed', null, null), message: { text: result.message, tone: 'info' } });
      return view.render(notPaired('error', result.message, result.retry ? UI_TEXTS.tryAgain : null));
    }
    // Paired: the widget's language, else the integration's widget language (the widget's own default).
    useLanguage(widgetLanguage ?? operatorLanguage(result.paired) ?? navigator.language);
    waiting = null;
    // a tab duplicated from this one from now on finds the engine taken
    void holdEngine(result.paired.engine.id);
    const running = new Engine(result.paired, {
      api,
      storage,
      loadDriver,
      ticker: createTicker(),
      connectSocket: (paired, handlers) =>
        new EngineSocket((url, options) => io(url, options) as EngineSocketIo, paired.realtime, paired.engine_token, handlers),
      askMic: () => askMicrophone(navigator.mediaDevices),
      focus: () => window.focus(),
      now: () => Date.now(),
      tellWidget: () => {
        try {
          // content-free, so any origin may have it: the widget re-reads its state from the service
          window.opener?.postMessage({ c2c: 'changed' }, '*');
        } catch {
          /* the opener went away */
        }
      },
    });
    engine = running;
    retry = () => void running.retryMic();
    stopShowing = running.onChange((model) => {
      view.render(model);
      guard(running.onCall);
    });
    await running.start(result.first);
  };

  window.addEventListener('pagehide', (event) => {
    if (event.persisted) return;
    engine?.unload();
    unloadWhileAsking();
  });
  window.addEventListener('pageshow', (event) => {
    if (event.persisted) engine?.resume();
  });
  // A widget in this browser sent a command: heartbeat now if the socket is down (Engine.nudge).
  window.addEventListener('message', (event: MessageEvent) => {
    if ((event.data as { c2c?: unknown } | null)?.c2c === 'nudge') engine?.nudge();
  });
  void watchMicPermission(navigator.permissions, (state) => engine?.micPermission(state));
  watchMicDevices(navigator.mediaDevices, (present) => engine?.micDevices(present));
  // Enable calls in a widget gives a window that runs no engine (its ticket refused, a reload's
  // pairing closed, its engine ended for good) a new ticket by navigating it to window_url. Only
  // the fragment changes, so the ticket arrives here, not as a new page. A running engine keeps
  // going: the ticket is dropped unused, and expires.
  window.addEventListener('hashchange', () => {
    const { ticket: fresh, lang } = takeFragment(window.location, window.history);
    if (!fresh || (engine && !engine.stopped)) return;
    widgetLanguage = openerLanguage(storage, lang) ?? widgetLanguage;
    if (pairing) return void (waiting = fresh);
    ticket = fresh;
    engine = null;
    stopShowing(); // the stopped engine shows nothing more, whatever it finishes late
    void attempt();
  });
  await attempt();
}

void run();

/**
 * The widget language the integration's operator chose, if one: `page` (the widget follows the
 * page it is on, which the window is not on) is none, and so is null, as nodes of an earlier
 * release answered it.
 */
function operatorLanguage(paired: Paired): string | undefined {
  const language = paired.policy.widget?.language;
  return language && language !== 'page' ? language : undefined;
}
