import { runtimeProblem } from './node-runtime.js';

// Imported first by the entry points (src/main.ts, src/cli.ts), so that a process on another Node.js line stops
// with one line before any dependency loads (docs/operations.md "Upgrading the runtime"). The one way past it,
// PACELINE_RUNTIME_CHECK=off, is for `npm run bench:runtime`, which runs the same build on the line before.
const problem = runtimeProblem(process.versions.node, process.execPath);
if (problem !== undefined && process.env.PACELINE_RUNTIME_CHECK !== 'off') {
  process.stderr.write(`paceline: ${problem}\n`);
  process.exit(1);
}
