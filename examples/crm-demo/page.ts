/** The demo CRM's one page: a contact list whose Call buttons go through the SDK. */
import type { Contact } from './contacts.js';

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
/** A string literal for an inline script: JSON, with `<` escaped so that no `</script>` ends the script early. */
const scriptString = (text: string) => JSON.stringify(text).replaceAll('<', '\\u003c');

/**
 * The page. `nonce` is this response's, named by its Content-Security-Policy (server.ts): the
 * page's own inline style and script carry it; the SDK's script is allowed by its origin.
 */
export function contactsPage(input: { siteUrl: string; apiBaseUrl?: string; integrationId: string; user: string; contacts: Contact[]; users: string[]; nonce: string }): string {
  const rows = input.contacts
    .map(
      (c) => `<tr>
  <td>${escape(c.name)}</td><td>${escape(c.company)}</td><td class="note">${escape(c.note)}</td>
  <td><button type="button" data-call="${escape(c.reference)}" data-testid="call-${escape(c.reference)}">Call</button></td>
</tr>`,
    )
    .join('\n');
  const switcher = input.users.map((name) => `<a href="/?as=${escape(name)}">${escape(name)}</a>`).join(' · ');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Demo CRM</title>
<style nonce="${escape(input.nonce)}">
  body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 52rem; color: #1d2433; }
  table { border-collapse: collapse; width: 100%; } td, th { text-align: left; padding: .45rem .6rem; border-bottom: 1px solid #e3e6ee; }
  .note { color: #6b7385; font-size: 13px; } button { font: inherit; padding: .3rem .9rem; cursor: pointer; }
  header { display: flex; justify-content: space-between; align-items: baseline; } #log { color: #6b7385; min-height: 1.5em; }
</style>
</head>
<body>
<header><h1>Demo CRM</h1><span>Signed in as <strong data-testid="crm-user">${escape(input.user)}</strong> (switch: ${switcher})</span></header>
<p>Calls go through the click-to-call widget (bottom right). Enable calls once, then call a contact.
The page never sees phone numbers: it sends a contact reference and the backend looks the number up.</p>
<table>
<thead><tr><th>Name</th><th>Company</th><th>Simulated behaviour</th><th></th></tr></thead>
<tbody>
${rows}
</tbody>
</table>
<p><button type="button" id="incoming" data-testid="simulate-incoming">Simulate an incoming call</button></p>
<p id="log" role="status"></p>

<script src="${escape(input.siteUrl)}/assets/js/click2call-sdk.js"></script>
<script nonce="${escape(input.nonce)}">
  // 1. Start the widget. The SDK asks our backend for a session on every page load.
  const c2c = ServiceClick2Call.init({
    integrationId: ${JSON.stringify(input.integrationId)},
    sessionEndpoint: '/click2call/session',
    requestCallEndpoint: '/click2call/call',${input.apiBaseUrl ? `
    // the service's API, where it is not on the script's origin
    apiBaseUrl: ${scriptString(input.apiBaseUrl)},` : ''}
    mode: 'persistent-window',
    // no position or language: the integration's defaults apply, else this page's <html lang>
  });
  const log = (text) => (document.getElementById('log').textContent = text);

  // 2. Call a contact by reference; our backend adds the number and forwards to POST /calls.
  document.querySelectorAll('[data-call]').forEach((button) =>
    button.addEventListener('click', async () => {
      const response = await c2c.requestCall({ contact_reference: button.dataset.call, request_id: crypto.randomUUID() });
      log(response && response.ok === false ? 'Refused: ' + response.message : 'Calling…');
    }),
  );

  // 3. Show refusals the widget reports.
  c2c.on('commandfailed', (failure) => log('The ' + failure.kind + ' did not go through: ' + failure.error));

  // Demo only: have the simulated provider ring this agent.
  document.getElementById('incoming').addEventListener('click', async () => {
    const response = await fetch('/demo/incoming', { method: 'POST' });
    const body = await response.json();
    log(response.ok ? 'Incoming call from ' + (body.display.name || 'a caller') : 'No incoming call: ' + body.message);
  });
</script>
</body>
</html>
`;
}
