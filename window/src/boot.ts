/**
 * Reading what the page gives the window: the JSON boot block #c2c-boot, and the launch ticket in
 * the URL fragment (#ticket=c2cl_…), which is removed from the address at once so it is never
 * left in the history, a bookmark or a screenshot.
 */

export interface Boot {
  apiBaseUrl: string;
  siteUrl: string;
  voiceProvider: string;
}

/** Parses #c2c-boot; throws when the page does not carry it. */
export function readBoot(doc: Document): Boot {
  const text = doc.getElementById('c2c-boot')?.textContent;
  if (!text) throw new Error('The call window page has no boot data.');
  const boot = JSON.parse(text) as Partial<Boot>;
  if (typeof boot.apiBaseUrl !== 'string' || !boot.apiBaseUrl) throw new Error('The boot data has no apiBaseUrl.');
  return {
    apiBaseUrl: boot.apiBaseUrl.replace(/\/+$/, ''),
    siteUrl: typeof boot.siteUrl === 'string' ? boot.siteUrl : '',
    voiceProvider: typeof boot.voiceProvider === 'string' ? boot.voiceProvider : 'simulated',
  };
}

/**
 * The fragment's launch ticket (or null) and the language of the widget that opened the window
 * (`lang`, which the SDK puts beside the ticket); then strips the fragment from the address with
 * history.replaceState, keeping the path and query. Whatever else the fragment held goes too.
 */
export function takeFragment(
  location: Pick<Location, 'hash' | 'pathname' | 'search'>,
  history: Pick<History, 'replaceState' | 'state'>,
): { ticket: string | null; lang: string | null } {
  const hash = location.hash;
  if (!hash || hash === '#') return { ticket: null, lang: null };
  const params = new URLSearchParams(hash.slice(1));
  const ticket = params.get('ticket')?.trim() || null;
  const lang = params.get('lang')?.trim() || null;
  history.replaceState(history.state, '', `${location.pathname}${location.search}`);
  return { ticket, lang };
}
