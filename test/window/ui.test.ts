// @vitest-environment happy-dom
/** The window's view: test ids for browser tests, the display exactly as sent, the timer from the server's numbers. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CONSENT_ARM_MS } from '../../window/src/consent-guard.js';
import type { Call } from '../../shared/types.js';
import { MESSAGES, useLanguage } from '../../window/src/messages.js';
import { formatElapsed, elapsedSeconds } from '../../window/src/timer.js';
import { WindowView, type ViewModel } from '../../window/src/ui.js';

afterEach(() => {
  vi.useRealTimers();
  useLanguage('en');
  document.body.replaceChildren();
});

const T = 1_767_261_600;
const timing: Call = {
  request_id: 'ci_1',
  call_id: 'ci_1',
  direction: 'outbound',
  status: 'connected',
  error: null,
  display: { name: 'Jo Bloggs', company: 'Bloggs Ltd', number: null, contact_reference: null, department: null },
  answered_at: T - 65,
  ended_at: null,
  duration: 65,
  expires_at: T,
  server_time: T,
  orphaned: false,
};

const base: ViewModel = { state: 'ready', agent: 'Ana Agent', call: null, hangupBusy: false, answerable: false, answerBusy: false, muteAllowed: true, muted: false, message: null, retry: null, connection: 'live', consent: null };

function mount() {
  document.body.innerHTML = '<div id="c2c-window"></div>';
  const actions = { answer: vi.fn(), hangup: vi.fn(), toggleMute: vi.fn(), retry: vi.fn(), consent: vi.fn() };
  let now = 1_000_000;
  const view = new WindowView(document.getElementById('c2c-window')!, actions, () => now);
  const byId = (id: string) => document.querySelector<HTMLElement>(`[data-testid="${id}"]`)!;
  return { view, actions, byId, advance: (ms: number) => (now += ms) };
}

describe('WindowView', () => {
  it("speaks its state with its call's status when either changes (a call ringing, connecting, how it ended), and only then", async () => {
    const { view, byId } = mount();
    const heard = byId('w-heard');
    expect(heard.getAttribute('role')).toBe('status');
    expect(byId('w-state').getAttribute('role')).toBeNull(); // announced through w-heard, once
    let writes = 0;
    new MutationObserver((records) => records.forEach((record) => (writes += record.addedNodes.length))).observe(heard, { childList: true });
    const card = (status: Call['status'], live: boolean, direction: 'inbound' | 'outbound' = 'outbound') => ({ direction, status, display: timing.display, timing, receivedAt: 1_000_000, live });
    view.render(base);
    expect(heard.textContent).toBe('Ready for calls');
    view.render({ ...base, state: 'call', call: card('incoming', true, 'inbound') });
    expect(heard.textContent).toBe('Incoming call: Jo Bloggs');
    view.render({ ...base, state: 'call', call: card('connected', true, 'inbound') });
    view.render({ ...base, state: 'call', call: card('connected', true, 'inbound') });
    expect(heard.textContent).toBe('On a call. Connected');
    view.render({ ...base, call: card('busy', false) });
    expect(heard.textContent).toBe('Ready for calls. Busy');
    await Promise.resolve();
    expect(writes).toBe(4);
  });

  it('asks for consent with two buttons, which answer yes and no, and hides them otherwise', () => {
    vi.useFakeTimers();
    const { view, actions, byId } = mount();
    view.render(base);
    expect(byId('w-consent').hidden).toBe(true);
    view.render({ ...base, state: 'confirm', consent: 'Use this window for the calls of Ana Agent (ana@acme.example)?' });
    expect(byId('w-consent').hidden).toBe(false);
    expect(byId('w-consent-question').textContent).toContain('Ana Agent (ana@acme.example)');
    expect(byId('w-state').dataset.state).toBe('confirm');
    vi.advanceTimersByTime(CONSENT_ARM_MS);
    byId('w-consent-yes').click();
    byId('w-consent-no').click();
    expect(actions.consent.mock.calls).toEqual([[true], [false]]);
  });

  it('takes no yes until the question has been on screen CONSENT_ARM_MS with the window in front (it cannot be slipped under a click meant for the opener)', () => {
    vi.useFakeTimers();
    const { view, actions, byId } = mount();
    const yes = byId('w-consent-yes') as HTMLButtonElement;
    view.render({ ...base, state: 'confirm', consent: 'Use this window for the calls of Ana Agent (ana@acme.example)?' });
    yes.click();
    vi.advanceTimersByTime(CONSENT_ARM_MS - 1);
    yes.click();
    expect(actions.consent).not.toHaveBeenCalled();
    expect(yes.disabled).toBe(true);
    // No (decline) needs no wait: it can only keep calls out
    byId('w-consent-no').click();
    expect(actions.consent.mock.calls).toEqual([[false]]);
    vi.advanceTimersByTime(1);
    // the window loses the front: the wait starts over when it is back
    window.dispatchEvent(new Event('blur'));
    yes.click();
    window.dispatchEvent(new Event('focus'));
    vi.advanceTimersByTime(CONSENT_ARM_MS - 1);
    yes.click();
    expect(actions.consent.mock.calls).toEqual([[false]]);
    vi.advanceTimersByTime(1);
    yes.click();
    expect(actions.consent.mock.calls).toEqual([[false], [true]]);
  });

  it('reads messages out from regions always there (errors at once), takes the focus to the consent question, names Mute by its label, and keeps the focus in the window when Hang up or Try again goes', () => {
    const { view, byId } = mount();
    const said = byId('w-said');
    const alerted = byId('w-alert');
    view.render(base);
    expect([said.getAttribute('role'), alerted.getAttribute('role')]).toEqual(['status', 'alert']);
    expect([said.hidden, alerted.hidden, said.textContent, alerted.textContent]).toEqual([false, false, '', '']);
    view.render({ ...base, message: { text: 'Reconnecting…', tone: 'warn' } });
    expect([said.textContent, alerted.textContent]).toEqual(['Reconnecting…', '']);
    view.render({ ...base, message: { text: MESSAGES.micDenied, tone: 'error' } });
    expect([said.textContent, alerted.textContent]).toEqual(['', MESSAGES.micDenied]);
    // the consent question takes the focus as it comes
    view.render({ ...base, state: 'confirm', consent: 'Use this window for the calls of Ana Agent (ana@acme.example)?' });
    expect(document.activeElement).toBe(byId('w-consent-question'));
    // Mute's name is its label, what a press does; no pressed state beside it ("Unmute, pressed")
    const live: ViewModel = { ...base, call: { direction: 'outbound', status: 'connected', display: timing.display, timing, receivedAt: 1_000_000, live: true } };
    view.render({ ...live, muted: true });
    expect([byId('w-mute').textContent, byId('w-mute').getAttribute('aria-label'), byId('w-mute').getAttribute('aria-pressed')]).toEqual(['Unmute', null, null]);
    // Try again going (a keyboard user pressed it) keeps the focus in the window too
    view.render({ ...base, state: 'error', retry: 'Try again' });
    byId('w-retry').focus();
    view.render({ ...base, state: 'pairing' } as ViewModel);
    expect(document.activeElement).toBe(byId('w-state'));
    view.render({ ...live, muted: true });
    byId('w-hangup').focus();
    expect(document.activeElement).toBe(byId('w-hangup'));
    // pressed, Hang up is busy: it says so, and keeps the focus (a disabled button would lose it to the page)
    view.render({ ...live, muted: true, hangupBusy: true });
    expect([byId('w-hangup').getAttribute('aria-disabled'), (byId('w-hangup') as HTMLButtonElement).disabled]).toEqual(['true', false]);
    expect(document.activeElement).toBe(byId('w-hangup'));
    view.render(base);
    expect(document.activeElement).toBe(byId('w-state'));
  });

  it('shows the agent, the state and the keep-open note', () => {
    const { view, byId } = mount();
    view.render(base);
    expect(byId('w-agent').textContent).toBe('Ana Agent');
    expect(byId('w-state').dataset.state).toBe('ready');
    expect(byId('w-state').textContent).toBe('Ready for calls');
    expect(byId('w-keep-open').textContent).toBe(MESSAGES.keepOpen);
    expect(byId('w-call').hidden).toBe(true);
    expect(byId('w-message').hidden).toBe(true);
  });

  it('keeps the keep-open note to the states that carry calls: not beside "You can close it", nor while pairing or asking', () => {
    const { view, byId } = mount();
    for (const state of ['enabling', 'no_mic', 'ready', 'call'] as const) {
      view.render({ ...base, state });
      expect(byId('w-keep-open').hidden, state).toBe(false);
    }
    for (const state of ['pairing', 'closed', 'error'] as const) {
      view.render({ ...base, state, message: { text: MESSAGES.consentDeclined, tone: 'info' } });
      expect(byId('w-keep-open').hidden, state).toBe(true);
    }
    view.render({ ...base, state: 'confirm', consent: 'Use this window for the calls of Ana?' });
    expect(byId('w-keep-open').hidden).toBe(true);
  });

  it('says it waits for the microphone only while it does: granted, it says the voice line is starting, in either language', () => {
    const { view, byId } = mount();
    view.render({ ...base, state: 'enabling' });
    expect(byId('w-state').textContent).toBe('Waiting for the microphone…');
    view.render({ ...base, state: 'enabling', voiceStarting: true });
    expect(byId('w-state').textContent).toBe('Starting the voice line…');
    expect(document.title).toBe('Starting the voice line… · Call window');
    useLanguage('fr');
    view.render({ ...base, state: 'enabling', voiceStarting: true });
    expect(byId('w-state').textContent).toBe('Démarrage de la ligne vocale…');
  });

  it('shows the call as the server sent it (a hidden number stays hidden), its status, a running timer, Hang up and Mute', () => {
    vi.useFakeTimers();
    const { view, byId, actions, advance } = mount();
    view.render({ ...base, state: 'call', call: { direction: 'outbound', status: 'connected', display: timing.display, timing, receivedAt: 1_000_000, live: true } });
    expect(byId('w-call-name').textContent).toBe('Jo Bloggs');
    expect(byId('w-call-company').textContent).toBe('Bloggs Ltd');
    expect(byId('w-call-number').hidden).toBe(true);
    expect(byId('w-call-status').dataset.status).toBe('connected');
    expect(byId('w-call-status').textContent).toBe('Connected');
    expect(byId('w-timer').textContent).toBe('1:05');
    advance(2500);
    vi.advanceTimersByTime(1000);
    expect(byId('w-timer').textContent).toBe('1:07');
    expect(byId('w-hangup').hidden).toBe(false);
    expect(byId('w-mute').hidden).toBe(false);
    byId('w-hangup').click();
    byId('w-mute').click();
    expect(actions.hangup).toHaveBeenCalledTimes(1);
    expect(actions.toggleMute).toHaveBeenCalledTimes(1);
    view.destroy();
  });

  it('offers no Mute when the policy does not allow it, and no Hang up once the call ended', () => {
    const { view, byId } = mount();
    const call = { direction: 'outbound' as const, status: 'connected' as const, display: { ...timing.display, number: '+442079460123' }, timing, receivedAt: 1_000_000, live: true };
    view.render({ ...base, state: 'call', muteAllowed: false, call });
    expect(byId('w-mute').hidden).toBe(true);
    expect(byId('w-call-number').textContent).toBe('+442079460123');
    view.render({ ...base, call: { ...call, status: 'completed', live: false, timing: { ...timing, ended_at: T, duration: 65 } } });
    expect(byId('w-hangup').hidden).toBe(true);
    expect(byId('w-call-status').textContent).toBe('Call ended');
    expect(byId('w-timer').textContent).toBe('1:05');
    view.destroy();
  });

  it('offers Answer while the model says a call can be answered here; a press answers, and a busy Answer says so and keeps the focus', () => {
    const { view, byId, actions } = mount();
    const ringing = { direction: 'inbound' as const, status: 'incoming' as const, display: timing.display, timing: { ...timing, answered_at: null }, receivedAt: 1_000_000, live: true };
    view.render({ ...base, state: 'call', call: ringing, answerable: true });
    const answer = byId('w-answer') as HTMLButtonElement;
    expect(answer.hidden).toBe(false);
    expect(answer.textContent).toBe('Answer');
    expect(byId('w-hangup').hidden).toBe(false); // declines it
    answer.click();
    expect(actions.answer).toHaveBeenCalledTimes(1);
    view.render({ ...base, state: 'call', call: ringing, answerable: true, answerBusy: true });
    expect(answer.getAttribute('aria-disabled')).toBe('true');
    expect(answer.disabled).toBe(false);
    // taken by the device: still `incoming` until the provider's report reaches the service, but answered
    view.render({ ...base, state: 'call', call: ringing, answerable: false });
    expect(answer.hidden).toBe(true);
    view.destroy();
  });

  it('shows messages and the Try again button', () => {
    const { view, byId, actions } = mount();
    view.render({ ...base, state: 'no_mic', message: { text: MESSAGES.micDenied, tone: 'error' }, retry: 'Try again' });
    expect(byId('w-message').textContent).toBe(MESSAGES.micDenied);
    expect(byId('w-message').dataset.tone).toBe('error');
    byId('w-retry').click();
    expect(actions.retry).toHaveBeenCalledTimes(1);
  });
});

describe('timer', () => {
  it("speaks French once told to (the integration's widget language), every text included, and English again", () => {
    const { view, byId } = mount();
    view.render(base);
    expect(byId('w-state').textContent).toBe('Ready for calls');
    expect(useLanguage('fr-CA')).toBe('fr');
    view.render({ ...base, state: 'call', muted: true, message: { text: MESSAGES.micDenied, tone: 'error' }, call: { direction: 'inbound', status: 'connected', display: timing.display, timing, receivedAt: 1_000_000, live: true } });
    expect(document.documentElement.lang).toBe('fr');
    expect(byId('w-state').textContent).toBe('En communication');
    expect(byId('w-call-direction').textContent).toBe('Appel entrant');
    view.render({ ...base, state: 'call', call: { direction: 'inbound', status: 'incoming', display: timing.display, timing, receivedAt: 1_000_000, live: true } });
    expect(byId('w-heard').textContent).toBe('Appel entrant : Jo Bloggs');
    view.render({ ...base, state: 'call', muted: true, message: { text: MESSAGES.micDenied, tone: 'error' }, call: { direction: 'inbound', status: 'connected', display: timing.display, timing, receivedAt: 1_000_000, live: true } });
    expect(byId('w-call-status').textContent).toBe('En ligne');
    expect(byId('w-hangup').textContent).toBe('Raccrocher');
    expect(byId('w-mute').textContent).toBe('Réactiver le micro');
    expect(byId('w-keep-open').textContent).toBe('Gardez cette fenêtre ouverte pendant les appels.');
    expect(byId('w-message').textContent).toContain('L’accès au micro est bloqué');
    expect(byId('w-connection').textContent).toBe('En direct');
    expect(document.title).toBe('En communication · Fenêtre d’appel');
    expect(useLanguage('de')).toBe('en');
    view.render(base);
    expect([byId('w-state').textContent, document.documentElement.lang]).toEqual(['Ready for calls', 'en']);
  });

  it('counts from server_time − answered_at plus local time since receipt', () => {
    expect(elapsedSeconds({ ...timing }, 0, 0)).toBe(65);
    expect(elapsedSeconds({ ...timing }, 1000, 11_999)).toBe(75);
    expect(elapsedSeconds({ ...timing, answered_at: null }, 0, 5000)).toBeNull();
    expect(elapsedSeconds({ ...timing, ended_at: T, duration: 42 }, 0, 99_000)).toBe(42);
    expect([formatElapsed(7), formatElapsed(754), formatElapsed(3723)]).toEqual(['0:07', '12:34', '1:02:03']);
  });
});
