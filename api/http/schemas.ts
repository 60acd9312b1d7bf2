/** Helpers for route schemas: error responses share the Error envelope schema. */
import { ErrorSchema } from '../../shared/schemas/resources.js';

/** `{401: ErrorSchema, …}` for the documented error statuses of a route. */
export function errorResponses<S extends number>(...statuses: S[]): Record<S, typeof ErrorSchema> {
  return Object.fromEntries(statuses.map((status) => [status, ErrorSchema])) as Record<S, typeof ErrorSchema>;
}
