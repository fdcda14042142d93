import { suite as uvuSuite, type Callback, type Test } from 'uvu';

/**
 * uvu's `suite`, whose `before` and `after` hooks print what they throw. uvu's runner returns from a `finally`
 * that swallows a hook's error: a suite whose set-up failed showed `(0 / N)` and nothing else. Every test file
 * takes `suite` from here.
 */
export function suite<T = Record<string, unknown>>(title = '', context?: T): Test<T> {
  const test = uvuSuite<T>(title, context);
  for (const name of ['before', 'after'] as const) {
    const register = test[name];
    const told = (hook: Callback<T>) =>
      register(async (state) => {
        try {
          await hook(state);
        } catch (error) {
          console.error(`\n# ${title}: its ${name} hook failed, so its tests did not run or did not end:`, error);
          throw error;
        }
      });
    test[name] = Object.assign(told, { each: register.each });
  }
  return test;
}
