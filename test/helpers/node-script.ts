import { join } from 'node:path';

/**
 * The node arguments that run one of the project's TypeScript scripts (`script`, a path from the
 * repository's root): the copy the runner compiled for this run (TEST_COMPILED_DIR,
 * test/runner/compile.ts), plain JavaScript as the test file itself runs; without the runner,
 * the source under tsx.
 */
export function scriptArgs(script: string): string[] {
  const compiled = process.env.TEST_COMPILED_DIR;
  if (!compiled) return ['--import', 'tsx', script];
  return ['--enable-source-maps', compiledScript(compiled, script)];
}

/** The file that runs in place of `script` (a path from the repository's root) once compiled into `compiled`. */
export function compiledScript(compiled: string, script: string): string {
  return join(compiled, script.replace(/\.ts$/, '.js'));
}
