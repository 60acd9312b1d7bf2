/**
 * One error handler renders every failure as the spec's envelope {ok:false, error, message}.
 * C2CError carries its own code; fastify's own errors (validation, content type, body size, JSON
 * syntax, unknown route) are mapped to catalogue codes; anything else is a 500 internal_error that
 * is logged, never shown, and logged without the request's data (loggableError).
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { C2CError, type ErrorCode } from '../../shared/errors.js';
import { LIMITS } from '../../shared/limits.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Codes for invalid fields, in the order the endpoint checks them. A request with several bad
     * fields is refused for the first one in this list (spec: validation runs in documented order).
     */
    fieldCodes?: ReadonlyArray<readonly [field: string, code: ErrorCode]>;
  }
}

interface ValidationIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params?: { keys?: string[] };
}

function validationError(request: FastifyRequest, error: FastifyError): C2CError {
  const issues = (error.validation ?? []) as ValidationIssue[];
  const context = error.validationContext ?? 'body';
  const fieldCodes = request.routeOptions.config?.fieldCodes ?? [];
  const topField = (issue: ValidationIssue) => issue.instancePath.split('/')[1] ?? '';
  const rank = (issue: ValidationIssue) => {
    const index = fieldCodes.findIndex(([field]) => field === topField(issue));
    return index === -1 ? fieldCodes.length : index;
  };
  const [first] = [...issues].sort((a, b) => rank(a) - rank(b));
  if (!first) return new C2CError('invalid_request');
  const code = context === 'body' ? (fieldCodes.find(([field]) => field === topField(first))?.[1] ?? 'invalid_request') : 'invalid_request';
  const where = first.instancePath ? `${context}${first.instancePath.replaceAll('/', '.')}` : context;
  const detail =
    first.keyword === 'unrecognized_keys' && first.params?.keys
      ? `unknown field(s) ${first.params.keys.join(', ')}`
      : (first.message ?? 'is invalid');
  return new C2CError(code, `${where}: ${detail}`);
}

/** Maps an error of fastify's own to the catalogue. */
function fromFastify(request: FastifyRequest, error: FastifyError): C2CError | null {
  if (hasZodFastifySchemaValidationErrors(error)) return validationError(request, error);
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new C2CError('invalid_request', 'The body must be JSON (Content-Type: application/json).');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new C2CError('invalid_request', 'The body is not valid JSON.');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      // 413, which HTTP clients and proxies know, with the catalogue's code
      return new C2CError('invalid_request', `The body is too large: ${LIMITS.requestMaxBytes / 1024} KB at most.`, { status: 413 });
  }
  if (error instanceof SyntaxError) return new C2CError('invalid_request', 'The body is not valid JSON.');
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return new C2CError('invalid_request', error.message);
  }
  return null;
}

export function sendError(reply: FastifyReply, error: C2CError): FastifyReply {
  if (error.retryAfter !== undefined) reply.header('retry-after', String(error.retryAfter));
  return reply.code(error.status).type('application/json; charset=utf-8').send(error.toJSON());
}

/**
 * Errors fastify meets before any route or hook (its `frameworkErrors` option): a path whose
 * percent-encoding is broken, or a parameter longer than the router takes. Neither can name
 * anything, so they are answered as an unknown address, without echoing the path.
 */
export function frameworkError(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  void sendError(reply, new C2CError('not_found', error.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'No such resource: a part of the path is too long.' : 'No such resource: the path is not validly encoded.'));
}

/**
 * What Node's HTTP server refuses before fastify sees a request (its `clientError`): a request that
 * did not arrive whole in time (408), headers too large (431), anything that is not HTTP (400).
 * Answered in the envelope like every other refusal, and the connection closed.
 */
export function clientError(error: Error & { code?: string }, socket: Duplex): void {
  // A connection reset has nobody left to tell.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'The request did not arrive whole in time; send it again.']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'The request headers are too large.']
        : [400, 'The request is not valid HTTP.'];
  const body = JSON.stringify(new C2CError('invalid_request', message).toJSON());
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(error);
}

/**
 * The fields of an unexpected error that are logged: what says what failed and where, none that
 * carries a request's data. A store error carries the statement (`query`), its parameters (`params`:
 * phone numbers, metadata, credential hashes) and text quoting them (`detail`, `where`, `hint`,
 * `internalQuery`); a log line keeps none of them (DESIGN convention 7), on either driver.
 */
const LOGGED_FIELDS = ['code', 'severity', 'routine', 'schema', 'table', 'column', 'dataType', 'constraint', 'statusCode'] as const;

/** SQLSTATE class 22, a data exception: its message quotes the value it could not take ('invalid input syntax for type integer: "…"'). */
const quotesAValue = (code: unknown) => typeof code === 'string' && code.startsWith('22');

/**
 * An error as a log line may hold it: its type, message, stack frames, the fields above, and its
 * causes alike. A plain object without prototype, which pino's error serializer renders as it
 * renders an error (`type` from `name`, causes appended), copying nothing else.
 */
export function loggableError(error: unknown, depth = 0): Record<string, unknown> {
  const logged: Record<string, unknown> = Object.create(null);
  if (!(error instanceof Error)) {
    logged.name = typeof error;
    logged.message = 'a value that is not an Error was thrown';
    return logged;
  }
  const fields = error as unknown as Record<string, unknown>;
  const name = error.constructor?.name || error.name;
  const message = quotesAValue(fields.code) ? 'a data exception (its message, which quotes a value, is not logged)' : error.message;
  // The stack's first line repeats the message: only the frames are kept.
  const frames = (error.stack ?? '').split('\n').filter((line) => line.trimStart().startsWith('at '));
  logged.name = name;
  logged.message = message;
  logged.stack = [`${name}: ${message}`, ...frames].join('\n');
  for (const field of LOGGED_FIELDS) if (typeof fields[field] === 'string' || typeof fields[field] === 'number') logged[field] = fields[field];
  if (error.cause !== undefined && depth < 3) logged.cause = loggableError(error.cause, depth + 1);
  return logged;
}

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const known = error instanceof C2CError ? error : fromFastify(request, error);
    if (known) return sendError(reply, known);
    request.log.error({ err: loggableError(error) }, 'unhandled error');
    return sendError(reply, new C2CError('internal_error'));
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new C2CError('not_found', `No route for ${request.method} ${request.url.split('?')[0]}.`)),
  );
}
