// `npm run lint`: the runtime's imports run one way (docs/architecture.md "Which way imports go"). Reads every
// TypeScript file of src/, workers/ and db/, follows its relative imports that load code at run time (`import
// type` and `export type` do not), and fails, naming each circle, when a file reaches itself again.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const ROOTS = ['src', 'workers', 'db'];
const root = resolve(dirname(new URL(import.meta.url).pathname), '../..');

const files = ROOTS.flatMap((dir) =>
  readdirSync(join(root, dir), { recursive: true })
    .filter((path) => path.endsWith('.ts') && !path.endsWith('.d.ts'))
    .map((path) => join(root, dir, path)),
);

// `import x from './a.js'`, `import { y } from '../b.js'`, `export * from './c.js'`, `import './d.js'`, across
// lines; `import type` / `export type` and `import()` are left out (no load at start, so no circle at run time).
const STATEMENT = /^(import|export)\s+(?!type\s)([^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]/gms;

/** The files `file` loads at run time, as absolute paths of .ts files. */
function importsOf(file) {
  const text = readFileSync(file, 'utf8');
  const found = [];
  for (const [, keyword, clause = '', target] of text.matchAll(STATEMENT)) {
    // `import { type A, type B } from` loads nothing either.
    const names = /\{([^}]*)\}/.exec(clause)?.[1];
    if (
      keyword === 'import' &&
      names &&
      !/^\s*\w/.test(clause) &&
      names.split(',').every((n) => /^\s*(type\s|$)/.test(n))
    )
      continue;
    const path = resolve(dirname(file), target.replace(/\.js$/, '.ts'));
    if (existsSync(path)) found.push(path);
    else if (existsSync(join(path.replace(/\.ts$/, ''), 'index.ts')))
      found.push(join(path.replace(/\.ts$/, ''), 'index.ts'));
  }
  return found;
}

const graph = new Map(files.map((file) => [file, importsOf(file)]));

// Tarjan's strongly connected components: every component of more than one file (or a file importing itself) is
// a circle.
let index = 0;
const stack = [];
const state = new Map();
const circles = [];
function connect(file) {
  const mine = { index, low: index, onStack: true };
  index += 1;
  state.set(file, mine);
  stack.push(file);
  for (const next of graph.get(file) ?? []) {
    if (!graph.has(next)) continue;
    const seen = state.get(next);
    if (!seen) {
      connect(next);
      mine.low = Math.min(mine.low, state.get(next).low);
    } else if (seen.onStack) mine.low = Math.min(mine.low, seen.index);
  }
  if (mine.low !== mine.index) return;
  const component = [];
  for (;;) {
    const member = stack.pop();
    state.get(member).onStack = false;
    component.push(member);
    if (member === file) break;
  }
  if (component.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(component);
}
for (const file of graph.keys()) if (!state.has(file)) connect(file);

if (circles.length > 0) {
  for (const circle of circles)
    console.error(
      `import circle: ${circle
        .map((file) => relative(root, file))
        .sort()
        .join(' ↔ ')}`,
    );
  console.error(`import-cycles: ${circles.length} circle(s) among ${files.length} runtime files`);
  process.exit(1);
}
console.log(`import-cycles: ${files.length} runtime files, no import circle`);
