import { suite as uvuSuite, type Callback, type Test } from 'uvu';

/** The line of the last suite to end, if the process outlives it by 5 s. */
let held: NodeJS.Timeout | undefined;

/**
 * uvu's `suite`, whose `before` and `after` hooks print what they throw. uvu's runner returns from a `finally`
 * that swallows a hook's error: a suite whose set-up failed showed `(0 / N)` and nothing else. Its `run` adds a
 * last `after` hook that names what still holds the process 5 s on. Every test file takes `suite` from here.
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
  // A file may run several suites, one after another: the next one's start cancels the line.
  test.before(() => clearTimeout(held));
  const run = test.run;
  test.run = () => {
    // The runner fails a file still running 10 s after its summary (docs/testing.md "How the tests run").
    test.after(() => {
      held = setTimeout(() => {
        console.error(`\n# ${title}: still running 5 s after its tests, held by`, process.getActiveResourcesInfo());
      }, 5_000);
      held.unref();
    });
    run();
  };
  return test;
}
