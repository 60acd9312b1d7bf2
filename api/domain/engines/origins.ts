/**
 * Where an engine may run (spec section 5, rule 7): the service's own pages (the call window) and
 * this installation's browser extensions (`C2C_EXTENSION_IDS`). REST and the gateway ask it of
 * every engine request or handshake that names an Origin: a browser cannot send a cross-origin JSON
 * POST without a CORS preflight the API refuses, but an extension with host permissions is not
 * bound by CORS, so only this check keeps other extensions out. A request without Origin (no
 * browser: a tool holding the ticket or token, which is the credential; or a same-origin GET, such
 * as a long-polling handshake to a gateway behind the site's own address) is let through: a
 * browser names the Origin of every cross-origin request, so no page elsewhere can leave it out.
 */
import { C2CError } from '../../../shared/errors.js';
import { parseOrigin } from '../../../shared/origin.js';
import type { Config } from '../../config.js';

type Places = Pick<Config, 'siteUrl' | 'extensionOrigins'>;

const EXTENSION_SCHEMES = /^(chrome|moz|safari-web|ms-browser)-extension:\/\//;

export function engineOriginAllowed(config: Places, origin: string): boolean {
  return parseOrigin(origin) === config.siteUrl || config.extensionOrigins.includes(origin);
}

/** Throws the refusal for an engine request from `origin`, unless it may come from there. */
export function assertEngineOrigin(config: Places, origin: string): void {
  if (engineOriginAllowed(config, origin)) return;
  throw new C2CError(
    'origin_not_allowed',
    EXTENSION_SCHEMES.test(origin) ? 'This extension is not allowed on this server.' : "An engine connects only from the service's own pages or an allowed extension.",
  );
}
