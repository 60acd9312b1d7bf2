/** Helpers for route schemas: error responses share the Error envelope schema. */
import { ErrorSchema } from '../../shared/schemas/resources.js';

/**
 * A route's refusals for its schema and the OpenAPI document. Every route may also answer 413 and
 * 422 (invalid_request: a body over 64 KB; a request it cannot read, such as a body that is not
 * JSON or a NUL in the query, even where it takes neither), 500 (internal_error) and 503
 * (service_unavailable with Retry-After: the store timing out, load shed, the node stopping:
 * docs/errors.md), so those are listed everywhere.
 */
export function errorResponses<S extends number>(...statuses: S[]): Record<S | 413 | 422 | 500 | 503, typeof ErrorSchema> {
  return Object.fromEntries([...statuses, 413, 422, 500, 503].map((status) => [status, ErrorSchema])) as Record<S | 413 | 422 | 500 | 503, typeof ErrorSchema>;
}
