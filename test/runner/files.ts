import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/** The Debian tools a test file may declare in its header; redis-server comes with the stores. */
export const TOOLS = ['prometheus', 'haproxy', 'chromium', 'ss'] as const;
export type Tool = (typeof TOOLS)[number];

export type Kind = 'unit' | 'int' | 'cluster';

export interface TestFile {
  path: string;
  /** unit: pure, no store; int: the shared stores in this process; cluster: real processes. */
  kind: Kind;
  needs: Tool[];
  /** The cores to keep for the file when files run side by side (`// Load: N` or `all` in its header), if it says. */
  load?: number;
}

/** `// Needs: prometheus, haproxy` among a file's first lines names the tools it runs. */
const NEEDS_LINE = /^\/\/ Needs: (.+)$/m;
/** `// Load: 1.5` keeps that much CPU for a file whose assertions count time; `// Load: all` runs it alone. */
const LOAD_LINE = /^\/\/ Load: (\d+(?:\.\d+)?|all)\b/m;
const HEADER_CHARS = 2_000;

export function kindOf(path: string): Kind {
  if (path.startsWith('test/cluster/')) return 'cluster';
  return path.endsWith('.unit.test.ts') ? 'unit' : 'int';
}

/** Every `*.test.ts` under test/ whose path contains one of `filters` (all when none). */
export async function findTestFiles(filters: string[]): Promise<TestFile[]> {
  const entries = await readdir('test', { recursive: true });
  const paths = entries
    .map((entry) => join('test', entry))
    .filter((path) => path.endsWith('.test.ts'))
    .filter((path) => filters.length === 0 || filters.some((filter) => path.includes(filter)))
    .sort();
  return Promise.all(paths.map((path) => readTestFile(path)));
}

async function readTestFile(path: string): Promise<TestFile> {
  const header = (await readFile(path, 'utf8')).slice(0, HEADER_CHARS);
  const load = LOAD_LINE.exec(header);
  const file: TestFile = { path, kind: kindOf(path), needs: readNeeds(path, header) };
  if (load !== null) file.load = load[1] === 'all' ? Infinity : Number(load[1]);
  return file;
}

/** The tools a file's header declares; an unknown name stops the run with one line. */
function readNeeds(path: string, header: string): Tool[] {
  const line = NEEDS_LINE.exec(header);
  if (line === null) return [];
  const names = line[1]!.split(/[,\s]+/).filter(Boolean);
  const unknown = names.filter((name) => !(TOOLS as readonly string[]).includes(name));
  if (unknown.length > 0) {
    throw new Error(`${path}: unknown tool in "// Needs:": ${unknown.join(', ')} (known: ${TOOLS.join(', ')})`);
  }
  return names as Tool[];
}
