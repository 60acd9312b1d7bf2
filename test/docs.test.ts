/** The docs stay true to the code: every catalogue code is documented with its status. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../shared/errors.js';

const root = join(import.meta.dirname, '..');

describe('docs/errors.md', () => {
  it('lists every code of the catalogue with its HTTP status', () => {
    const doc = readFileSync(join(root, 'docs', 'errors.md'), 'utf8');
    for (const [code, spec] of Object.entries(ERROR_CATALOGUE)) {
      expect(doc, code).toMatch(new RegExp(`\\| \`${code}\` \\| ${spec.status} \\|`));
    }
  });
});
