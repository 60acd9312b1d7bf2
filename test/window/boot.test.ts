// @vitest-environment happy-dom
/** The window's boot: the boot block, the launch ticket read from the fragment and removed at once. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { readBoot, takeFragment } from '../../window/src/boot.js';

const takeTicket = (...args: Parameters<typeof takeFragment>) => takeFragment(...args).ticket;

afterEach(() => {
  vi.restoreAllMocks();
  document.body.replaceChildren();
});

function at(url: string) {
  (window as unknown as { happyDOM: { setURL(url: string): void } }).happyDOM.setURL(url);
}

describe('the launch ticket in the fragment', () => {
  it('is read, and the fragment is removed from the address with replaceState (path and query kept)', () => {
    at('http://127.0.0.1:8080/click2call/window?x=1#ticket=c2cl_abc123');
    const replace = vi.spyOn(window.history, 'replaceState');
    expect(takeTicket(window.location, window.history)).toBe('c2cl_abc123');
    expect(replace).toHaveBeenCalledTimes(1);
    expect(replace.mock.calls[0]![2]).toBe('/click2call/window?x=1');
    expect(window.location.hash).toBe('');
    expect(window.location.href).toBe('http://127.0.0.1:8080/click2call/window?x=1');
    expect(window.location.href).not.toContain('c2cl_');
  });

  it('is null without a fragment, and the address is left alone', () => {
    at('http://127.0.0.1:8080/click2call/window');
    const replace = vi.spyOn(window.history, 'replaceState');
    expect(takeTicket(window.location, window.history)).toBeNull();
    expect(replace).not.toHaveBeenCalled();
  });

  it('removes a fragment without a ticket too (nothing secret stays in the address)', () => {
    const history = { state: null, replaceState: vi.fn() };
    expect(takeTicket({ hash: '#foo=bar', pathname: '/click2call/window', search: '' }, history)).toBeNull();
    expect(history.replaceState).toHaveBeenCalledWith(null, '', '/click2call/window');
    expect(takeTicket({ hash: '#ticket=', pathname: '/w', search: '' }, history)).toBeNull();
  });

  it("carries the opening widget's language beside the ticket, removed with it", () => {
    const history = { state: null, replaceState: vi.fn() };
    expect(takeFragment({ hash: '#ticket=c2cl_abc&lang=fr', pathname: '/click2call/window', search: '' }, history)).toEqual({ ticket: 'c2cl_abc', lang: 'fr' });
    expect(history.replaceState).toHaveBeenCalledWith(null, '', '/click2call/window');
    expect(takeFragment({ hash: '#ticket=c2cl_abc', pathname: '/w', search: '' }, history)).toEqual({ ticket: 'c2cl_abc', lang: null });
  });
});

describe('the boot block', () => {
  it('reads apiBaseUrl, siteUrl and voiceProvider from #c2c-boot', () => {
    document.body.innerHTML = `<div id="c2c-window"></div><script id="c2c-boot" type="application/json">{"apiBaseUrl":"http://127.0.0.1:8080/api/v1/click2call/","siteUrl":"http://127.0.0.1:8080","voiceProvider":"simulated"}</script>`;
    expect(readBoot(document)).toEqual({ apiBaseUrl: 'http://127.0.0.1:8080/api/v1/click2call', siteUrl: 'http://127.0.0.1:8080', voiceProvider: 'simulated' });
  });

  it('refuses a page without boot data', () => {
    document.body.innerHTML = '<div id="c2c-window"></div>';
    expect(() => readBoot(document)).toThrow(/boot data/);
  });
});
