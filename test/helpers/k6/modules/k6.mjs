/** k6: check() and fail(). */
import { add, record } from './runtime.mjs';

/** A predicate that throws is a failed check, and its error ends the iteration (k6's TestCheckThrows). */
export function check(value, checks) {
  let all = true;
  for (const [name, predicate] of Object.entries(checks)) {
    let passed = false;
    let thrown;
    try {
      passed = Boolean(predicate(value));
    } catch (error) {
      thrown = error;
    }
    const entry = (record.checks[name] = record.checks[name] || { passes: 0, fails: 0 });
    if (passed) entry.passes += 1;
    else entry.fails += 1;
    add('checks', passed ? 1 : 0);
    if (thrown !== undefined) throw thrown;
    all = all && passed;
  }
  return all;
}

export function fail(message) {
  throw new Error(message);
}

export default { check, fail };
