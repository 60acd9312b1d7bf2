/**
 * k6/http: asyncRequest() and expectedStatuses(). A response has k6's shape: status (0 when no
 * answer came), body as text, headers under Go's canonical names (`Etag`, `Content-Type`), error,
 * timings.duration. A status outside the expected ones counts in http_req_failed.
 */
import { add, record } from './runtime.mjs';

const canonical = (name) => name.toLowerCase().replace(/(^|-)([a-z])/g, (_, dash, letter) => dash + letter.toUpperCase());

export function expectedStatuses(...statuses) {
  return { statuses };
}

export async function asyncRequest(method, url, body, params = {}) {
  const started = performance.now();
  let response;
  try {
    const answer = await fetch(url, { method, body: body ?? undefined, headers: params.headers ?? {} });
    const headers = {};
    answer.headers.forEach((value, name) => {
      headers[canonical(name)] = value;
    });
    response = { status: answer.status, body: await answer.text(), headers, error: '' };
  } catch (error) {
    response = { status: 0, body: null, headers: {}, error: String(error.cause ?? error) };
  }
  response.url = url;
  response.timings = { duration: performance.now() - started };
  response.json = () => JSON.parse(response.body);
  const expected = params.responseCallback?.statuses ?? [200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 307, 308];
  const failed = !expected.includes(response.status);
  record.http.requests += 1;
  if (failed) record.http.failed += 1;
  const key = `${params.tags?.name ?? url} ${response.status}`;
  record.http.statuses[key] = (record.http.statuses[key] ?? 0) + 1;
  add('http_req_duration', response.timings.duration);
  return response;
}

export default { asyncRequest, expectedStatuses };
