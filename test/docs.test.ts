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

describe('deploy/c2c.service', () => {
  it("lets the API list the machine's addresses, which it does on start with HOST=0.0.0.0 (over netlink)", () => {
    const unit = readFileSync(join(root, 'deploy', 'c2c.service'), 'utf8');
    const families = /^RestrictAddressFamilies=(.*)$/m.exec(unit)?.[1]?.split(/\s+/) ?? [];
    expect(families).toEqual(expect.arrayContaining(['AF_INET', 'AF_INET6', 'AF_NETLINK']));
  });
});
