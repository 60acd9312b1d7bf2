/** Helpers for route schemas: error responses share the Error envelope schema. */
import { ErrorSchema } from '../../shared/schemas/resources.js';

/** `{401: ErrorSchema, …}` for the documented error statuses of a route. */
/**
 * A route's refusals for its schema and the OpenAPI document. Every route may also answer 500
 * (internal_error) and 503 (service_unavailable with Retry-After: the store timing out, load shed,
 * the node stopping: docs/errors.md), so those are listed everywhere.
 */
export function errorResponses<S extends number>(...statuses: S[]): Record<S | 500 | 503, typeof ErrorSchema> {
  return Object.fromEntries([...statuses, 500, 503].map((status) => [status, ErrorSchema])) as Record<S | 500 | 503, typeof ErrorSchema>;
}
