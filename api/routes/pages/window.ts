/**
 * GET {site_url}/click2call/window (spec section 4): the call window page. It reads its launch
 * ticket from the URL fragment, pairs, and runs the engine (window/src). Without ?embed= it may not
 * be framed at all (frame-ancestors 'none'); the framed variant arrives with frame-shell mode.
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import { C2CError } from '../../../shared/errors.js';
import type { Services } from '../../services.js';
import { WINDOW_STYLE } from '../../../window/src/style.js';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export function windowPage(config: { apiBaseUrl: string; siteUrl: string; voiceProvider: string }): string {
  // The window pairs as a simulated engine when the service runs the simulated provider.
  const boot = JSON.stringify({ apiBaseUrl: config.apiBaseUrl, siteUrl: config.siteUrl, voiceProvider: config.voiceProvider }).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Call window</title>
<link rel="icon" href="data:,">
<style id="c2c-window-style">${WINDOW_STYLE}</style>
</head>
<body>
<div id="c2c-window" data-site="${escapeHtml(config.siteUrl)}"></div>
<script id="c2c-boot" type="application/json">${boot}</script>
<script src="/assets/js/click2call-window.js"></script>
</body>
</html>
`;
}

export const windowRoutes =
  (services: Services): FastifyPluginAsync =>
  async (app) => {
    const { config } = services;
    const html = windowPage(config);
    const gateway = config.gatewayUrl;
    const wsGateway = gateway.replace(/^http/, 'ws');
    const csp = [
      "default-src 'self'",
      "script-src 'self'",
      // The window's one style sheet, by its hash: no other inline style runs. It is in the page
      // itself (the view adds it only where it is missing), so the page and the hash always come
      // from the same server, whatever version of the script a browser cached.
      `style-src 'self' 'sha256-${createHash('sha256').update(WINDOW_STYLE).digest('base64')}'`,
      `connect-src 'self' ${config.publicBaseUrl} ${gateway} ${wsGateway} https://*.twilio.com wss://*.twilio.com`,
      "media-src 'self' blob: https://*.twilio.com",
      "worker-src 'self'",
      "img-src 'self' data:",
      "frame-ancestors 'none'",
      "base-uri 'none'",
      "form-action 'none'",
    ].join('; ');
    app.get('/click2call/window', { schema: { hide: true } }, async (request, reply) => {
      if ((request.query as { embed?: string }).embed !== undefined) {
        throw new C2CError('not_found', 'The framed call window (frame-shell mode) is not available on this server yet.');
      }
      return reply
        .header('content-security-policy', csp)
        .header('x-frame-options', 'DENY')
        .header('permissions-policy', 'microphone=(self)')
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .type('text/html; charset=utf-8')
        .send(html);
    });
  };
