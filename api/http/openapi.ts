/**
 * The OpenAPI 3.1 document, generated from the same zod schemas that validate requests
 * (@fastify/swagger + fastify-type-provider-zod's transforms), served at
 * /developers/click2call/openapi.json.
 */
import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { Config } from '../config.js';

export const OPENAPI_PATH = '/developers/click2call/openapi.json';

export async function registerOpenApi(app: FastifyInstance, config: Config): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Click-to-call API',
        version: '1.0.0',
        description:
          'Server-key, widget-token and engine endpoints of the click-to-call service. Every error is ' +
          '{ok:false, error, message} with a code from the catalogue (docs/errors.md).',
      },
      servers: [{ url: config.publicBaseUrl }],
      components: {
        securitySchemes: {
          serverKey: { type: 'http', scheme: 'bearer', description: 'c2ck_… server key (backend only)' },
          widgetToken: { type: 'http', scheme: 'bearer', description: 'c2cw_… widget token' },
          engineToken: { type: 'http', scheme: 'bearer', description: 'c2ce_… engine token' },
        },
      },
    },
    transform: jsonSchemaTransform,
    transformObject: (input) => markOptionalBodies(jsonSchemaTransformObject(input)),
  });
}

type Document = ReturnType<typeof jsonSchemaTransformObject>;

/**
 * @fastify/swagger marks every request body required. A body whose schema takes null may be left
 * out altogether (shared/schemas/engine-api.ts, optionalBody: the engine's hangup and close), and
 * the document says so.
 */
function markOptionalBodies(document: Document): Document {
  const paths = (document as { paths?: Record<string, Record<string, { requestBody?: { required?: boolean; content?: Record<string, { schema?: { anyOf?: Array<{ type?: unknown }> } }> } }>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      const body = operation.requestBody;
      const takesNull = Object.values(body?.content ?? {}).some((media) => media.schema?.anyOf?.some((option) => option.type === 'null'));
      if (body && takesNull) body.required = false;
    }
  }
  return document;
}

export function registerOpenApiRoute(app: FastifyInstance): void {
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async () => app.swagger());
}
