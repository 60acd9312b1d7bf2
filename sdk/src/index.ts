/**
 * ServiceClick2Call: the browser SDK (spec section 4, "SDK"). The IIFE build makes these exports
 * the global object; its methods act on the last initialised widget, so
 * `ServiceClick2Call.init({...})` then `ServiceClick2Call.enableCalls()` works.
 */
import { io } from 'socket.io-client';
import { Click2CallWidget, onPageBody, type ClientDeps } from './client.js';
import type { CommandResult } from './contract.js';
import { SdkError } from './http.js';
import { systemClock } from './timing.js';
import type { CallParams, InitOptions, Listener, PublicState, SdkEventName } from './types.js';
import type { SocketFactory } from './transport.js';

export type * from './contract.js';
export type * from './types.js';
export type { WidgetStateName } from './machine.js';
export { WIDGET_STATES, TRANSITIONS } from './machine.js';
export { SdkError, Click2CallWidget };

export const version = '1.0.0';

// Read while the <script> runs: document.currentScript is null afterwards (and for modules).
const scriptOrigin = (() => {
  try {
    const src = (typeof document !== 'undefined' && (document.currentScript as HTMLScriptElement | null)?.src) || '';
    return src ? new URL(src).origin : null;
  } catch {
    return null;
  }
})();

function defaultDeps(): ClientDeps {
  let storage: Storage | null = null;
  try {
    storage = window.localStorage;
  } catch {
    storage = null; // blocked third-party storage
  }
  return {
    fetch: (input, init) => fetch(input, init),
    io: io as unknown as SocketFactory,
    clock: systemClock,
    open: (url, target, features) => window.open(url, target, features),
    storage,
    origin: location.origin,
    scriptOrigin,
  };
}

let current: Click2CallWidget | null = null;
/**
 * The widget mounted in each container. A page that runs init() again for the same container (a
 * single-page app mounting its layout anew) means to replace its widget, not to add a second one
 * that polls, holds a socket and shows the same calls beside the first.
 */
const mounted = new WeakMap<object, Click2CallWidget>();
/** The container of widgets init() gave none: the page's body, which may not exist yet (init() in <head>). */
const PAGE = {};

/**
 * Options init() cannot start a widget with at all (not an object, a container that is no element:
 * a selector string, say) are refused before anything else, so that the widget already there (an
 * options object that failed to load, handed to init() again) stays as it was.
 */
function assertUsable(options: unknown): asserts options is InitOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new SdkError('invalid_options', 'init() takes an options object: {integrationId, sessionEndpoint, …}.');
  }
  const { container } = options as { container?: unknown };
  // an element by its shape, not instanceof: one of a same-origin frame's document is another realm's
  if (container !== undefined && container !== null && (container as Node).nodeType !== 1) {
    throw new SdkError('invalid_options', 'container must be an element (document.querySelector(…)), not a selector or anything else.');
  }
}

/** Creates and starts a widget, detaching the one its container held; later calls on the global act on it. */
export function init(options: InitOptions, deps?: Partial<ClientDeps>): Click2CallWidget {
  assertUsable(options);
  // the page's body, given or not, is one container: its widget is fixed in the page's corner
  const container: object = options.container && !onPageBody(options.container) ? options.container : PAGE;
  mounted.get(container)?.detach();
  const created = new Click2CallWidget(options, { ...defaultDeps(), ...deps });
  mounted.set(container, created);
  current = created;
  return created.start();
}

function widget(): Click2CallWidget {
  if (!current) throw new SdkError('not_initialised', 'Call ServiceClick2Call.init() first.');
  return current;
}

export const enableCalls = (): boolean => widget().enableCalls();
export const requestCall = (params?: CallParams): Promise<unknown> => widget().requestCall(params);
export const answer = (): Promise<CommandResult> => widget().answer();
export const decline = (): Promise<CommandResult> => widget().decline();
export const hangup = (): Promise<CommandResult> => widget().hangup();
export const setMuted = (muted: boolean): Promise<CommandResult> => widget().setMuted(muted);
export const sendDigits = (digits: string): Promise<CommandResult> => widget().sendDigits(digits);
export const setAvailability = (available: boolean): Promise<CommandResult> => widget().setAvailability(available);
export const getState = (): PublicState => widget().getState();
export const on = <E extends SdkEventName>(event: E, fn: Listener<E>): Click2CallWidget => widget().on(event, fn);
export const off = <E extends SdkEventName>(event: E, fn: Listener<E>): Click2CallWidget => widget().off(event, fn);
export const detach = (): void => widget().detach();
export const endSession = (): Promise<unknown> => widget().endSession();

/**
 * Frame-shell mode (spec section 4) is not built in this version: no page runs inside a shell, and
 * there is no shell to enter. enterShell fails clearly (SdkError `not_supported`) rather than being
 * missing, so a page written for the shell learns why; calls work through the popup or tab window.
 */
export const inShell = false;
export function enterShell(_shellPath?: string): never {
  throw new SdkError('not_supported', 'The frame shell is not available in this version; the call window opens as a popup or tab (enableCalls()).');
}
