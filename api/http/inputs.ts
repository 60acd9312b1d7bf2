/**
 * What every route takes before its own schema runs.
 * - An empty body is no body, whatever its Content-Type: many HTTP clients label every POST as JSON,
 *   and a bodiless POST from others (curl -d '', PHP's cURL, Java's HttpURLConnection) as a form;
 *   the routes the spec gives no body (a call's hangup, refresh, revoke, launch-ticket) must not
 *   refuse it. A route that needs a body still refuses its absence through its schema. A body that
 *   is there must be JSON.
 * - A body that is not UTF-8 is refused: decoded leniently, each bad byte became U+FFFD, so two
 *   request_ids differing only there were one command.
 * - Keys that could reach an object's prototype are refused by name, below (storable.ts), rather
 *   than by the JSON parser as "not valid JSON".
 * - What no store can take is refused (shared/schemas/storable.ts): a NUL character (or half a
 *   surrogate pair) in a query or body, or a body nested too deep; in a path parameter it names
 *   nothing (404). Provider webhooks included, whose bodies
 *   are form fields.
 * - A header that carries one value may come once: Node joins repeated header lines it does not
 *   know into one value ("a, b"), so two Idempotency-Keys would silently count as a third key.
 */
import type { FastifyInstance } from 'fastify';
import { C2CError } from '../../shared/errors.js';
import { unstorable } from '../../shared/schemas/storable.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

export function parseJsonBodies(app: FastifyInstance): void {
  const json = app.getDefaultJsonParser('ignore', 'ignore');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const bytes = body as Buffer;
    if (bytes.length === 0) return done(null, undefined);
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      return done(new C2CError('invalid_request', 'The body is not valid UTF-8.'), undefined);
    }
    json(request, text, done);
  });
  // Any other type, text/plain included (fastify's own parser took an empty one as '', refused by
  // routes whose body is optional, and any text as a body; a provider webhook's form has its own
  // parser, in its routes' scope)
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => {
    if ((body as Buffer).length === 0) return done(null, undefined);
    done(new C2CError('invalid_request', 'The body must be JSON (Content-Type: application/json).'), undefined);
  });
}

export function refuseUnstorableInput(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    // A path that no store could hold names nothing: not found, as a path not validly encoded is
    // (spec: GET /calls/{id} answers 200 or 404).
    const inPath = unstorable(request.params);
    if (inPath) throw new C2CError('not_found', `No such resource: a part of the path cannot name one (${inPath}).`);
    const why = unstorable(request.query) ?? unstorable(request.body);
    if (why) throw new C2CError('invalid_request', `The request cannot be taken: ${why}.`);
  });
}

/** Headers whose value is one token, never a list. */
const SINGLE_VALUE_HEADERS = ['idempotency-key'] as const;

export function refuseRepeatedHeaders(app: FastifyInstance): void {
  // preValidation, as the schema's own header checks: after authentication and rate limits.
  app.addHook('preValidation', async (request) => {
    for (const name of SINGLE_VALUE_HEADERS) {
      // headersDistinct is Node's (fastify.inject's requests lack it: their headers are taken as given)
      const values = request.raw.headersDistinct?.[name];
      if (values && values.length > 1) throw new C2CError('invalid_request', `Send the ${name} header once (it came ${values.length} times).`);
    }
  });
}
