/** Node module hooks: k6's module names resolve to the stand-in modules, and nothing else bare does. */
const MODULES = {
  k6: 'k6.mjs',
  'k6/http': 'http.mjs',
  'k6/metrics': 'metrics.mjs',
  'k6/timers': 'timers.mjs',
  'k6/websockets': 'websockets.mjs',
};

export async function resolve(specifier, context, next) {
  const file = MODULES[specifier];
  if (file) return { url: new URL(`./modules/${file}`, import.meta.url).href, shortCircuit: true };
  const fromScript = context.parentURL && context.parentURL.includes('/loadtest/k6/');
  if (fromScript && !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.startsWith('file:')) {
    throw new Error(`a k6 script imports ${specifier}, which k6 does not have (the stand-in offers ${Object.keys(MODULES).join(', ')})`);
  }
  return next(specifier, context);
}
