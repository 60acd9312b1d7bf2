/**
 * Where an engine may run (spec section 5, rule 7): the service's own pages (the call window) and
 * this installation's browser extensions (`C2C_EXTENSION_IDS`). The gateway asks it of every engine
 * handshake (a browser always sends Origin there); REST asks it of every engine request that names
 * an Origin: a browser cannot send a cross-origin JSON POST without a CORS preflight the API
 * refuses, but an extension with host permissions is not bound by CORS, so only this check keeps
 * other extensions out. A request without Origin (no browser: a tool holding the ticket or token,
 * which is the credential) is let through.
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
