/** The OpenAPI document (spec section 9): valid OpenAPI 3, version 1.0.0, every endpoint with its statuses. */
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, createHarness, type Harness } from '../helpers/harness.js';

describe('GET /developers/click2call/openapi.json', () => {
  let h: Harness;
  let doc: any;

  beforeAll(async () => {
    h = await createHarness('pglite');
    const res = await client(h.app).get('//developers/click2call/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
  });
  afterAll(() => h.close());

  it('is a valid OpenAPI 3 document declaring version 1.0.0', async () => {
    expect(doc.openapi).toMatch(/^3\./);
    expect(doc.info.version).toBe('1.0.0');
    await SwaggerParser.validate(structuredClone(doc));
  });

  it('declares every endpoint with its documented statuses', () => {
    const expected: Record<string, Record<string, string[]>> = {
      '/api/v1/click2call/sessions': { post: ['201', '401', '403', '404', '409', '422', '429'] },
      '/api/v1/click2call/calls': { post: ['200', '202', '402', '403', '409', '422', '429'] },
      '/api/v1/click2call/calls/{id}': { get: ['200', '404'] },
      '/api/v1/click2call/calls/{id}/hangup': { post: ['200', '404', '502'] },
      '/api/v1/click2call/widget/state': { get: ['200', '401', '403'] },
      '/api/v1/click2call/widget/launch-ticket': { post: ['200', '401', '403'] },
      '/api/v1/click2call/widget/commands': { post: ['200', '403', '409', '422'] },
      '/api/v1/click2call/widget/refresh': { post: ['200', '401', '403'] },
      '/api/v1/click2call/widget/revoke': { post: ['200', '401', '403'] },
      '/api/v1/click2call/engine/pair': { post: ['201', '401', '409'] },
      '/api/v1/click2call/engine/voice-token': { post: ['200', '503'] },
      '/api/v1/click2call/engine/heartbeat': { post: ['200', '401', '403', '422'] },
      '/api/v1/click2call/engine/claim': { post: ['200', '404'] },
      '/api/v1/click2call/engine/hangup': { post: ['200', '401', '502'] },
      '/api/v1/click2call/engine/close': { post: ['200', '401'] },
    };
    for (const [path, methods] of Object.entries(expected)) {
      for (const [method, statuses] of Object.entries(methods)) {
        const operation = doc.paths[path]?.[method];
        expect(operation, `${method} ${path}`).toBeDefined();
        for (const status of statuses) expect(Object.keys(operation.responses), `${method} ${path}`).toContain(status);
      }
    }
    // Any route may be sent a request it cannot read (a body that is not JSON, a NUL in the query),
    // fail or be briefly unavailable (docs/errors.md): every documented operation says so.
    for (const [path, methods] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
      for (const [method, operation] of Object.entries(methods)) {
        expect(Object.keys(operation.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['422', '500', '503']));
      }
    }
  });

  it('describes the resources from the same schemas that validate requests', () => {
    const schemas = doc.components.schemas;
    for (const name of ['Session', 'SessionRequest', 'Call', 'CallRequest', 'Policy', 'Engine', 'Display', 'WidgetState', 'Error']) {
      expect(schemas[name], name).toBeDefined();
    }
    expect(schemas.CallRequest.additionalProperties).toBe(false);
    expect(schemas.CallRequest.properties.contact_reference.maxLength).toBe(120);
    expect(schemas.Call.properties.status.enum).toContain('no_answer');
  });

  it('marks a body required only where the route needs one', () => {
    const body = (path: string) => doc.paths[`/api/v1/click2call${path}`].post.requestBody;
    expect(body('/engine/hangup').required).toBe(false);
    expect(body('/engine/close').required).toBe(false);
    expect(body('/engine/heartbeat').required).toBe(true);
    expect(body('/calls').required).toBe(true);
  });
});
