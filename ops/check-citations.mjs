// Fails when a comment or a page cites a docs section that does not exist: a page name
// (docs/<page>.md, or README) followed by a heading in double quotes must name a heading of that
// page, in any of ROOTS (README "Development").
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOTS = ['src', 'workers', 'db', 'ops', 'test', 'clients', 'docs', 'README.md', 'CHANGELOG.md', 'Dockerfile'];
const SKIP = new Set(['node_modules', 'dist', '.data', 'results']);
// The page, then anything a comment puts between it and the quoted section when a line breaks;
// quotes may be escaped (a citation inside a JSON string).
const CITATION = /\b(README(?:\.md)?|docs\/[a-z0-9-]+\.md)[\s*/#]*\\?"([^"\n\\]+)\\?"/g;

/** Every file under `path` (a file or a folder), skipping build output, data and dependencies. */
function listFiles(path) {
  let stats;
  try {
    stats = statSync(path);
  } catch {
    return [];
  }
  if (stats.isFile()) return [path];
  return readdirSync(path)
    .filter((name) => !SKIP.has(name))
    .flatMap((name) => listFiles(join(path, name)));
}

/** The headings of a Markdown page (code blocks excluded), or null when the page is missing. */
function readHeadings(page) {
  let text;
  try {
    text = readFileSync(page, 'utf8');
  } catch {
    return null;
  }
  const headings = new Set();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const match = !fenced && /^#{1,6} +(.*?)[ #]*$/.exec(line);
    if (match) headings.add(match[1]);
  }
  return headings;
}

const pages = new Map();
const problems = [];
let checked = 0;
for (const file of ROOTS.flatMap(listFiles)) {
  const text = readFileSync(file, 'utf8');
  if (text.includes('\u0000')) continue;
  for (const match of text.matchAll(CITATION)) {
    const page = match[1].startsWith('README') ? 'README.md' : match[1];
    if (!pages.has(page)) pages.set(page, readHeadings(page));
    const headings = pages.get(page);
    const line = text.slice(0, match.index).split('\n').length;
    checked++;
    if (headings === null) problems.push(`${file}:${line}: cites ${page}, which does not exist`);
    else if (!headings.has(match[2])) problems.push(`${file}:${line}: ${page} has no section "${match[2]}"`);
  }
}
for (const problem of problems) console.error(problem);
if (problems.length > 0) {
  console.error(`check-citations: ${problems.length} of ${checked} citations name no existing section`);
  process.exit(1);
}
console.log(`check-citations: ${checked} citations, every section exists`);
