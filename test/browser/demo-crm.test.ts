/**
 * The SDK, the widget and the call window in real Chromium (issue "Browser"), driving the real
 * service and the demo CRM as a user would: enable calls, call a contact, control the call from a
 * second tab, answer and decline incoming calls, controls per policy, the blocked-popup path, the
 * socket cut and restored, and the window closed mid-call.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../api/clock.js';
import { setPolicy } from '../../api/domain/operator/integrations.js';
import { LIMITS } from '../../shared/limits.js';
import { chromiumPath, launchChromium, startStack, type Stack } from '../helpers/browser.js';

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS ? join(import.meta.dirname, '..', '..', 'docs', 'screenshots') : null;

/** The SDK's public state, read in the page. */
const sdk = (page: Page) => page.evaluate(() => (window as any).ServiceClick2Call.getState());
const widgetState = async (page: Page) => (await sdk(page)).state as string;
const callStatus = async (page: Page) => ((await sdk(page)).call?.status ?? null) as string | null;

async function shoot(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.locator('[data-testid=c2c-widget]').screenshot({ path: join(SCREENSHOTS, `widget-${name}.png`) });
}

describe.skipIf(!chromiumPath())('the demo CRM in real Chromium', { timeout: 90_000 }, () => {
  let stack: Stack;
  let browser: Browser;
  const contexts: BrowserContext[] = [];

  const newContext = async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });
    contexts.push(context);
    return context;
  };
  const openCrm = async (context: BrowserContext) => {
    const page = await context.newPage();
    await page.goto(stack.crmUrl);
    await expect.poll(() => widgetState(page), { timeout: 15_000 }).not.toMatch(/^(init|connecting)$/);
    return page;
  };
  const windowState = (window: Page) => window.locator('[data-testid=w-state]').getAttribute('data-state');
  /** The first pairing for the agent in this browser asks first (window/src/consent.ts): the agent says yes. */
  const consentIfAsked = async (window: Page) => {
    await expect.poll(async () => (await windowState(window).catch(() => null)) ?? 'pairing', { timeout: 15_000 }).not.toBe('pairing');
    if ((await windowState(window)) === 'confirm') await window.locator('[data-testid=w-consent-yes]').click();
  };
  /** Enable calls from the widget; the popup pairs (consented) and the widget shows ready. */
  const enableCalls = async (context: BrowserContext, page: Page) => {
    const popup = context.waitForEvent('page');
    await page.locator('[data-testid=c2c-enable]').click();
    const window = await popup;
    await consentIfAsked(window);
    await expect.poll(() => widgetState(page), { timeout: 20_000 }).toBe('ready');
    return window;
  };
  const serverCall = async (id: string) => {
    const response = await fetch(`${stack.demo.base_url}/calls/${id}`, { headers: { authorization: `Bearer ${stack.demo.server_key}` } });
    return (await response.json()) as any;
  };

  beforeAll(async () => {
    stack = await startStack();
    browser = await launchChromium();
  }, 120_000);
  // Each test starts from an agent without a live call window: closing a context closes its window,
  // which tells the service (otherwise the next enableCalls would rightly bring that window forward).
  afterEach(async () => {
    for (const context of contexts.splice(0)) await context.close().catch(() => {});
    await expect.poll(async () => (await serverEngineState()) !== 'ready', { timeout: 15_000 }).toBe(true);
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });
  const serverEngineState = async () => {
    const [row] = await stack.node.services.db.query<{ state: string }>(
      "SELECT state FROM engines WHERE integration_id = $1 ORDER BY created_at DESC LIMIT 1",
      [stack.demo.integration_id],
    );
    return row?.state;
  };

  it('enables calls, calls a contact, and hangs up from a second tab with the server\'s duration', async () => {
    const context = await newContext();
    const page = await openCrm(context);
    expect(await widgetState(page)).toBe('offline');
    await shoot(page, 'offline');

    const window = await enableCalls(context, page);
    expect(window.url()).toMatch(/\/click2call\/window$/); // the ticket left the address bar
    await expect.poll(() => window.locator('[data-testid=w-state]').textContent()).toBeTruthy();
    // its style sheet ran under the page's CSP (allowed by its hash): the state is styled as ready
    await expect.poll(() => windowState(window)).toBe('ready');
    expect(await window.locator('[data-testid=w-state]').evaluate((node) => getComputedStyle(node).backgroundColor)).toBe('rgb(227, 245, 232)');
    await shoot(page, 'ready');

    await page.locator('[data-testid=call-crm-1002]').click();
    await expect.poll(() => callStatus(page), { timeout: 15_000 }).toBe('connected');
    const { call } = await sdk(page);
    // The demo policy masks numbers: the page only ever sees bullets and the last digits.
    expect(call.display.number).toMatch(/^\+1•+0123$/);
    expect(await page.content()).not.toContain('+12025550123');
    await expect.poll(() => page.locator('[data-testid=c2c-call-name]').textContent()).toContain('Sam Rivera');

    const second = await openCrm(context);
    await expect.poll(() => callStatus(second), { timeout: 10_000 }).toBe('connected');
    await new Promise((resolve) => setTimeout(resolve, 2500)); // let the call run a little
    await shoot(page, 'call');
    await second.locator('[data-testid=c2c-hangup]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');
    await expect.poll(() => callStatus(second), { timeout: 10_000 }).toBe('completed');

    const ended = await serverCall(call.call_id);
    expect(ended.status).toBe('completed');
    expect(ended.duration).toBeGreaterThanOrEqual(2);
    expect(ended.duration).toBe(ended.ended_at - ended.answered_at);
    expect((await sdk(page)).call.duration).toBe(ended.duration);
  });

  it("works under the CRM's strict Content-Security-Policy: the widget is styled, its socket connects, and nothing is refused", async () => {
    const context = await newContext();
    // recorded from before the page's first script, in every page of the context
    await context.addInitScript(() => {
      (window as any).__violations = [];
      document.addEventListener('securitypolicyviolation', (e) => (window as any).__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
    });
    const page = await context.newPage();
    const refusedInConsole: string[] = [];
    page.on('console', (message) => {
      if (/Content Security Policy/i.test(message.text())) refusedInConsole.push(message.text());
    });
    const pushed: string[] = [];
    page.on('websocket', (ws) => ws.on('framereceived', ({ payload }) => void pushed.push(String(payload))));
    const response = await page.goto(stack.crmUrl);
    // the policy the demo sends: no 'unsafe-inline' anywhere, scripts by nonce and origin
    const policy = response!.headers()['content-security-policy']!;
    expect(policy).toMatch(/default-src 'none'/);
    expect(policy).toMatch(/style-src 'nonce-[^']+'(;|$)/);
    expect(policy).not.toContain('unsafe');
    await expect.poll(() => widgetState(page), { timeout: 15_000 }).toBe('offline');

    // the widget's own CSS applies (a constructed sheet, which style-src does not govern)
    const panel = page.locator('[data-testid=c2c-widget]');
    expect(await panel.evaluate((node) => [getComputedStyle(node).width, getComputedStyle(node).borderTopLeftRadius])).toEqual(['260px', '10px']);
    expect(await page.locator('[data-testid=c2c-enable]').evaluate((node) => getComputedStyle(node).backgroundColor)).toBe('rgb(31, 136, 61)');
    // the snapshot came by push: connect-src names the gateway
    await expect.poll(() => pushed.some((frame) => frame.startsWith('42["state"')), { timeout: 10_000 }).toBe(true);

    await enableCalls(context, page);
    await page.locator('[data-testid=call-crm-1002]').click();
    await expect.poll(() => callStatus(page), { timeout: 15_000 }).toBe('connected');
    await page.locator('[data-testid=c2c-hangup]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');
    expect(await page.evaluate(() => (window as any).__violations)).toEqual([]);
    expect(refusedInConsole).toEqual([]);
  });

  it("styles a widget whose container is in a same-origin frame: the frame's document gets its own style sheet", async () => {
    const page = await openCrm(await newContext());
    const width = await page.evaluate(async ({ integrationId, apiBaseUrl }) => {
      const frame = document.createElement('iframe');
      document.body.appendChild(frame);
      const panel = () => frame.contentDocument!.querySelector('c2c-widget')?.shadowRoot?.querySelector('[data-testid=c2c-widget]') as HTMLElement | null;
      (window as any).ServiceClick2Call.init({ integrationId, sessionEndpoint: '/click2call/session', apiBaseUrl, container: frame.contentDocument!.body });
      for (let i = 0; i < 50 && !panel(); i += 1) await new Promise((resolve) => setTimeout(resolve, 100));
      return frame.contentWindow!.getComputedStyle(panel()!).width;
    }, { integrationId: stack.demo.integration_id, apiBaseUrl: stack.demo.base_url });
    expect(width).toBe('260px');
  });

  it('offers "Open in new tab" when the popup is blocked, and the tab works as the call window', async () => {
    const context = await newContext();
    await context.addInitScript(() => {
      if (location.pathname === '/') window.open = () => null; // what a popup blocker does
    });
    const page = await openCrm(context);
    await page.locator('[data-testid=c2c-enable]').click();
    const link = page.locator('[data-testid=c2c-open-tab]');
    await expect.poll(() => link.isVisible(), { timeout: 10_000 }).toBe(true);
    expect(await link.getAttribute('href')).toMatch(/\/click2call\/window#ticket=c2cl_/);
    const tab = context.waitForEvent('page');
    await link.click();
    await consentIfAsked(await tab);
    await expect.poll(() => widgetState(page), { timeout: 20_000 }).toBe('ready');
  });

  it('rings the widget with an incoming call that is answered, and declines another', async () => {
    const context = await newContext();
    const page = await openCrm(context);
    await enableCalls(context, page);

    await page.locator('[data-testid=simulate-incoming]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('incoming');
    expect(await widgetState(page)).toBe('call');
    await shoot(page, 'incoming');
    // Under the pointer, Answer and Decline keep white text on a deeper green and red (a generic
    // button hover once turned them white on pale grey).
    const colours = (id: string) => page.locator(`[data-testid=${id}]`).evaluate((el) => [getComputedStyle(el).color, getComputedStyle(el).backgroundColor]);
    await page.locator('[data-testid=c2c-answer]').hover();
    expect(await colours('c2c-answer')).toEqual(['rgb(255, 255, 255)', 'rgb(26, 127, 55)']);
    await page.locator('[data-testid=c2c-decline]').hover();
    expect(await colours('c2c-decline')).toEqual(['rgb(255, 255, 255)', 'rgb(164, 14, 38)']);
    await page.locator('[data-testid=c2c-answer]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('connected');
    await page.locator('[data-testid=c2c-hangup]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');

    await page.locator('[data-testid=simulate-incoming]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('incoming');
    await page.locator('[data-testid=c2c-decline]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('rejected');
  });

  it('shows mute and the keypad only where the policy enables them, and they act on the call', async () => {
    const context = await newContext();
    const page = await openCrm(context);
    await enableCalls(context, page);
    await page.locator('[data-testid=call-crm-1001]').click();
    await expect.poll(() => callStatus(page), { timeout: 15_000 }).toBe('connected');
    expect(await page.locator('[data-testid=c2c-mute]').isVisible()).toBe(true);
    expect(await page.locator('[data-testid=c2c-dtmf]').isVisible()).toBe(true);

    await page.locator('[data-testid=c2c-mute]').click();
    await expect.poll(async () => (await sdk(page)).engine?.muted, { timeout: 20_000 }).toBe(true);
    await page.locator('[data-testid=c2c-dtmf]').click();
    await page.locator('[data-testid=c2c-digit-1]').click();
    await page.locator('[data-testid=c2c-digit-2]').click();
    const { call } = await sdk(page);
    const [row] = await stack.node.services.db.query<{ provider_call_sid: string }>('SELECT provider_call_sid FROM call_intents WHERE id = $1', [call.call_id]);
    await expect.poll(() => stack.node.services.providers.simulator.digitsHeard(row!.provider_call_sid), { timeout: 20_000 }).toBe('12');
    await page.locator('[data-testid=c2c-hangup]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');

    const { services } = stack.node;
    await setPolicy({ db: services.db, bus: services.bus, clock: services.clock }, stack.demo.integration_id, { controls: [] });
    try {
      await page.reload();
      await expect.poll(() => widgetState(page), { timeout: 15_000 }).toBe('ready');
      await page.locator('[data-testid=call-crm-1001]').click();
      await expect.poll(() => callStatus(page), { timeout: 15_000 }).toBe('connected');
      expect(await page.locator('[data-testid=c2c-mute]').isVisible()).toBe(false);
      expect(await page.locator('[data-testid=c2c-dtmf]').isVisible()).toBe(false);
      await page.locator('[data-testid=c2c-hangup]').click();
      await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');
    } finally {
      await setPolicy({ db: services.db, bus: services.bus, clock: services.clock }, stack.demo.integration_id, { controls: ['mute', 'dtmf'] });
    }
  });

  it('keeps the state right by polling while the socket is cut, and goes back to push when it returns', async () => {
    const context = await newContext();
    let cut = false;
    const open: Array<{ close(): Promise<void> }> = [];
    const page = await context.newPage();
    await page.routeWebSocket(/socket\.io/, (ws) => {
      if (cut) return void ws.close();
      open.push(ws);
      ws.connectToServer();
    });
    await page.route('**/socket.io/**', (route) => (cut ? route.abort() : route.continue()));
    const polls: number[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/widget/state')) polls.push(Date.now());
    });
    await page.goto(stack.crmUrl);
    await expect.poll(() => widgetState(page), { timeout: 15_000 }).not.toMatch(/^(init|connecting)$/);
    await enableCalls(context, page);

    cut = true;
    for (const ws of open.splice(0)) await ws.close();
    const cutAt = Date.now();
    // A change made elsewhere (the backend's view of the agent) reaches the page by polling.
    const other = await openCrm(await newContext());
    await other.evaluate(() => (window as any).ServiceClick2Call.setAvailability(false));
    await expect.poll(async () => (await sdk(page)).engine?.available, { timeout: 15_000 }).toBe(false);
    expect(polls.filter((t) => t > cutAt).length).toBeGreaterThan(0);
    expect(await widgetState(page)).toBe('unavailable');

    cut = false;
    await expect.poll(() => open.length, { timeout: 30_000 }).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const quietFrom = Date.now();
    await other.evaluate(() => (window as any).ServiceClick2Call.setAvailability(true));
    await expect.poll(async () => (await sdk(page)).engine?.available, { timeout: 5_000 }).toBe(true);
    // Watched for more than two poll periods: a widget still polling would poll twice at least.
    await new Promise((resolve) => setTimeout(resolve, 2 * LIMITS.pollMs + 1500));
    // Push is back: the page stopped polling (at most one poll in flight when the socket returned).
    expect(polls.filter((t) => t > quietFrom).length).toBeLessThanOrEqual(1);
  });

  it('with every socket cut, the widget and its call window nudge each other by window messages: a command reaches the window at once, and its effect the widget', async () => {
    const context = await newContext();
    await context.routeWebSocket(/socket\.io/, (ws) => void ws.close());
    await context.route('**/socket.io/**', (route) => route.abort());
    const page = await openCrm(context);
    const window = await enableCalls(context, page);
    const beats: number[] = [];
    window.on('request', (request) => {
      if (request.url().includes('/engine/heartbeat')) beats.push(Date.now());
    });
    const polls: number[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/widget/state')) polls.push(Date.now());
    });
    await page.locator('[data-testid=call-crm-1001]').click();
    await expect.poll(() => callStatus(page), { timeout: 20_000 }).toBe('connected');
    // Without the messages each would wait for the other's next period (3 s with sockets down):
    // four times in a row within moments is not chance (the bounds leave room for a loaded machine).
    for (const muted of [true, false, true, false]) {
      await new Promise((resolve) => setTimeout(resolve, 1200)); // past both sides' once-a-second bound
      const sentAt = Date.now();
      await page.evaluate((m) => (window as any).ServiceClick2Call.setMuted(m), muted);
      await expect.poll(() => beats.find((t) => t >= sentAt), { timeout: 3000 }).toBeDefined();
      const beatAt = beats.find((t) => t >= sentAt)!;
      expect(beatAt - sentAt).toBeLessThan(800);
      // The window reports the mute in a heartbeat of its own; its answer shows the engine changed,
      // the window says so, and the widget polls at once, not at its next poll.
      await expect.poll(() => polls.find((t) => t > beatAt), { timeout: 4000 }).toBeDefined();
      const polledAt = polls.find((t) => t > beatAt)!;
      const lastBeat = Math.max(...beats.filter((t) => t <= polledAt));
      expect(polledAt - lastBeat).toBeLessThan(600);
      await expect.poll(async () => (await sdk(page)).engine?.muted, { timeout: 5000 }).toBe(muted);
    }
    await page.locator('[data-testid=c2c-hangup]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');
    // The window says it is closing with a request on its way out, which a busy route handler can
    // lose as the context closes: close it here, unrouted, and see the service heard it.
    await context.unrouteAll({ behavior: 'wait' });
    await window.close({ runBeforeUnload: true });
    await expect.poll(() => serverEngineState(), { timeout: 15_000 }).toBe('closed');
  });

  it('gives a reloaded call window a new ticket from Enable calls, in that same window', async () => {
    const context = await newContext();
    const page = await openCrm(context);
    const window = await enableCalls(context, page);
    // A reload closes the engine (pagehide), and the page that comes back has no ticket.
    await window.reload();
    await expect.poll(() => window.locator('[data-testid=w-message]').textContent(), { timeout: 15_000 }).toContain('Open the call window again from the widget');
    await expect.poll(() => widgetState(page), { timeout: 20_000 }).toBe('offline');
    const opened: Page[] = [];
    context.on('page', (p) => void opened.push(p));
    await page.locator('[data-testid=c2c-enable]').click();
    await expect.poll(() => widgetState(page), { timeout: 20_000 }).toBe('ready');
    expect(opened).toHaveLength(0); // the window the agent already has, not a second one
    expect(window.url()).toMatch(/\/click2call\/window$/); // the new ticket left the address bar too
    await expect.poll(() => window.locator('[data-testid=w-message]').textContent()).not.toContain('Open the call window again');
    expect(await serverEngineState()).toBe('ready');
  });

  it("does not carry an agent's calls in a window someone else opened until its user says yes; no closes it", async () => {
    // Anyone holding a widget token can make a ticket and send this browser to the window with it
    // (a link, a redirect): with the microphone already allowed for the service, nothing else stops it.
    const ticketFor = async () => {
      const session = await fetch(`${stack.demo.base_url}/sessions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${stack.demo.server_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ integration_id: stack.demo.integration_id, agent: stack.demo.agent, origin: stack.demo.allowed_origin }),
      });
      const { widget_token } = (await session.json()) as { widget_token: string };
      const ticket = await fetch(`${stack.demo.base_url}/widget/launch-ticket`, { method: 'POST', headers: { authorization: `Bearer ${widget_token}`, origin: stack.demo.allowed_origin } });
      return ((await ticket.json()) as { window_url: string }).window_url;
    };
    const context = await newContext();
    await context.grantPermissions(['microphone'], { origin: new URL(stack.demo.site_url).origin });
    const window = await context.newPage();
    await window.goto(await ticketFor());
    await expect.poll(() => windowState(window), { timeout: 15_000 }).toBe('confirm');
    const question = await window.locator('[data-testid=w-consent-question]').textContent();
    expect(question).toContain(stack.demo.agent.value);
    expect(question).toContain('in Demo CRM?'); // the integration, by the name the operator gave it
    await new Promise((resolve) => setTimeout(resolve, 1000)); // time enough to have come up, had it not asked
    expect(await serverEngineState()).toBe('enabling'); // paired, but never ready: no call can be placed through it
    // A reload (or the opener navigating the window) does not carry the unanswered pairing on: it closes it.
    await window.reload();
    await expect.poll(() => window.locator('[data-testid=w-message]').textContent(), { timeout: 15_000 }).toContain('Open the call window again from the widget');
    await expect.poll(() => serverEngineState(), { timeout: 10_000 }).toBe('closed');
    await window.goto(await ticketFor());
    await expect.poll(() => windowState(window), { timeout: 15_000 }).toBe('confirm');
    await window.locator('[data-testid=w-consent-no]').click();
    await expect.poll(() => serverEngineState(), { timeout: 10_000 }).toBe('closed');
    // the window shows it once the service's answer to its close is in
    await expect.poll(() => windowState(window), { timeout: 5_000 }).toBe('closed');

    // A yes is kept in this browser: the next window for this agent carries calls without asking.
    const second = await context.newPage();
    await second.goto(await ticketFor());
    await expect.poll(() => windowState(second), { timeout: 15_000 }).toBe('confirm');
    await second.locator('[data-testid=w-consent-yes]').click();
    await expect.poll(() => serverEngineState(), { timeout: 15_000 }).toBe('ready');
    await second.close({ runBeforeUnload: true });
    await expect.poll(() => serverEngineState(), { timeout: 10_000 }).toBe('closed');
    const third = await context.newPage();
    await third.goto(await ticketFor());
    await expect.poll(() => serverEngineState(), { timeout: 15_000 }).toBe('ready');
    expect(await windowState(third)).toBe('ready');

    // A duplicate of that tab (its sessionStorage copied, the stored pairing included) leaves the
    // engine to it: no second engine on one token, and closing the copy does not close it.
    const pairing = await third.evaluate(() => sessionStorage.getItem('c2c.window.pairing'));
    expect(pairing).toContain('engine_token');
    const copy = await context.newPage();
    await copy.addInitScript((stored) => sessionStorage.setItem('c2c.window.pairing', stored), pairing!);
    await copy.goto(third.url());
    await expect.poll(() => copy.locator('[data-testid=w-message]').textContent(), { timeout: 15_000 }).toContain('already open in another tab');
    await copy.close({ runBeforeUnload: true });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await serverEngineState()).toBe('ready');
    expect(await windowState(third)).toBe('ready');
  });

  it("keeps speaking the opening widget's language after a reload, which strips it with the ticket", async () => {
    const context = await newContext();
    const window = await context.newPage();
    await window.goto(`${stack.demo.site_url}/click2call/window#ticket=c2cl_spent&lang=fr`);
    const message = () => window.locator('[data-testid=w-message]').textContent();
    await expect.poll(message, { timeout: 15_000 }).toContain('Ce lien de fenêtre d’appel a expiré');
    expect(window.url()).toMatch(/\/click2call\/window$/);
    await window.reload();
    await expect.poll(message, { timeout: 15_000 }).toContain('Ouvrez à nouveau la fenêtre d’appel depuis le widget');
  });

  it('from a tab that cannot reach the live window by name, asks it forward instead of replacing it', async () => {
    const context = await newContext();
    const page = await openCrm(context);
    await enableCalls(context, page);
    const engines = async () => (await stack.node.services.db.query<{ id: string }>('SELECT id FROM engines WHERE integration_id = $1', [stack.demo.integration_id])).map((r) => r.id);
    const before = await engines();
    // A tab the agent opened (not by script) is unrelated to the popup: the popup's name does not reach it.
    const other = await openCrm(context);
    await expect.poll(() => widgetState(other), { timeout: 15_000 }).toBe('ready');
    await other.evaluate(() => {
      const button = document.createElement('button');
      button.id = 'enable-here';
      button.textContent = 'enable';
      button.onclick = () => (window as any).ServiceClick2Call.enableCalls();
      document.body.appendChild(button);
    });
    await other.locator('#enable-here').click(); // a real user gesture
    await expect.poll(() => other.locator('[data-testid=c2c-message]').textContent(), { timeout: 10_000 }).toContain('open elsewhere');
    await new Promise((resolve) => setTimeout(resolve, 1000)); // a replacement would pair by now
    expect(await engines()).toEqual(before);
    expect(await serverEngineState()).toBe('ready');
    expect(await widgetState(page)).toBe('ready');
  });

  it('orphans the call when the window closes mid-call, and the page can still hang it up', async () => {
    const context = await newContext();
    const page = await openCrm(context);
    const window = await enableCalls(context, page);
    await page.locator('[data-testid=call-crm-1002]').click();
    await expect.poll(() => callStatus(page), { timeout: 15_000 }).toBe('connected');
    window.on('dialog', (dialog) => void dialog.accept()); // the "leave during a call?" warning
    await window.close({ runBeforeUnload: true });
    await expect.poll(async () => (await sdk(page)).call?.orphaned, { timeout: 60_000 }).toBe(true);
    // No window holds the call: only Hang up acts on it.
    expect(await page.locator('[data-testid=c2c-mute]').isVisible()).toBe(false);
    expect(await page.locator('[data-testid=c2c-dtmf]').isVisible()).toBe(false);
    await shoot(page, 'orphaned');
    await page.locator('[data-testid=c2c-hangup]').click();
    await expect.poll(() => callStatus(page), { timeout: 10_000 }).toBe('completed');
  });
});

describe.skipIf(!chromiumPath())('widget tokens that expire quickly', () => {
  let stack: Stack;
  let browser: Browser;
  // The service's time, moved by the test along with the page's (Playwright's clock).
  const clock = new ManualClock(Date.now());

  beforeAll(async () => {
    stack = await startStack({ WIDGET_TOKEN_TTL_SECONDS: '12' }, { clock });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.close();
  });

  it('refreshes the token before it expires, across several lifetimes, and keeps working', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    // Refreshed with the token itself, not by asking the integrator's backend for a new session.
    const posts = { sessions: 0, refreshes: 0 };
    page.on('request', (request) => {
      if (request.method() !== 'POST') return;
      const path = new URL(request.url()).pathname;
      if (path === '/click2call/session') posts.sessions += 1;
      if (path.endsWith('/widget/refresh')) posts.refreshes += 1;
    });
    // The page's clock runs on from the service's time, and jumps when the test moves it; the
    // service's follows it.
    await context.clock.install({ time: clock.now() });
    const follow = async () => {
      const pageNow = await page.evaluate(() => Date.now());
      if (pageNow > clock.now()) await clock.advance(pageNow - clock.now());
    };
    await page.goto(stack.crmUrl);
    await expect.poll(() => widgetState(page), { timeout: 15_000 }).toBe('offline');
    const first = (await sdk(page)).session.expires_at as number;
    // More than two lifetimes, a second at a time (each refresh is on its way before the next second).
    for (let second = 0; second < 26; second += 1) {
      await context.clock.fastForward(1000);
      await follow();
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const later = await sdk(page);
    expect(later.state).toBe('offline');
    expect(later.session.expires_at).toBeGreaterThan(first + 10);
    expect(posts).toMatchObject({ sessions: 1 });
    expect(posts.refreshes).toBeGreaterThanOrEqual(2);
    const result = await page.evaluate(() => (window as any).ServiceClick2Call.requestCall({ contact_reference: 'crm-1002' }));
    expect(result).toMatchObject({ ok: false, error: 'agent_offline' });
    await context.close();
  }, 60_000);
});
