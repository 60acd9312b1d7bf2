/** GET /click2call/window: the call window's page and the headers that keep it safe (spec section 4). */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WINDOW_STYLE } from '../../window/src/style.js';
import { createHarness, type Harness } from '../helpers/harness.js';

describe('the call window page', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('pglite');
  });
  afterAll(() => h.close());

  it('allows its own style sheet by hash and no other inline style, is never framed, cached or told its referrer', async () => {
    const page = await h.app.inject({ method: 'GET', url: '/click2call/window' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    const csp = String(page.headers['content-security-policy']);
    const directives = new Map(csp.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));
    expect(directives.get('style-src')).toEqual(["'self'", `'sha256-${createHash('sha256').update(WINDOW_STYLE).digest('base64')}'`]);
    expect(csp).not.toContain('unsafe-inline');
    expect(directives.get('script-src')).toEqual(["'self'"]);
    expect(directives.get('frame-ancestors')).toEqual(["'none'"]);
    expect(page.headers).toMatchObject({ 'x-frame-options': 'DENY', 'referrer-policy': 'no-referrer', 'cache-control': 'no-store', 'permissions-policy': 'microphone=(self)' });
    expect(page.body).toContain('<meta name="referrer" content="no-referrer">');
    // the style sheet the hash allows is in the page itself, from the same server as the hash
    expect(page.body).toContain(`<style id="c2c-window-style">${WINDOW_STYLE}</style>`);
  });

  it('has no framed variant yet: ?embed= is 404', async () => {
    const framed = await h.app.inject({ method: 'GET', url: '/click2call/window?embed=1' });
    expect(framed.statusCode).toBe(404);
    expect(framed.json()).toMatchObject({ ok: false, error: 'not_found' });
  });
});
