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
 * Returns the launch ticket from the fragment (or null) and strips the fragment from the address
 * with history.replaceState, keeping the path and query. Whatever else the fragment held goes too.
 */
export function takeTicket(location: Pick<Location, 'hash' | 'pathname' | 'search'>, history: Pick<History, 'replaceState' | 'state'>): string | null {
  const hash = location.hash;
  if (!hash || hash === '#') return null;
  const ticket = new URLSearchParams(hash.slice(1)).get('ticket');
  history.replaceState(history.state, '', `${location.pathname}${location.search}`);
  return ticket && ticket.trim() ? ticket.trim() : null;
}
