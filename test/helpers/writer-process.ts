/**
 * A writer process for consistency tests: POSTs tasks to `WRITER_BASE` with `WRITER_TOKEN`,
 * `WRITER_CONCURRENCY` requests in flight, until `WRITER_DURATION_MS` has passed or
 * `WRITER_MAX_POSTS` were sent, whichever comes first. Prints one JSON line per response:
 * `{"id":N,"at":ms}` for a 201 (`at` = Date.now() once the response was read) or
 * `{"status":S,"text":"..."}` otherwise, then `{"done":true,"sent":n}`.
 *
 *   node --import tsx test/helpers/writer-process.ts
 */

const base = required('WRITER_BASE');
const token = required('WRITER_TOKEN');
const concurrency = Number(process.env.WRITER_CONCURRENCY ?? 4);
const deadline = Date.now() + Number(process.env.WRITER_DURATION_MS ?? 3_000);
const maxPosts = Number(process.env.WRITER_MAX_POSTS ?? 2_000);
const label = process.env.WRITER_LABEL ?? String(process.pid);

let sent = 0;

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

async function postOne(n: number): Promise<void> {
  const response = await fetch(`${base}/api/tasks/`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ title: `writer ${label} #${n}` }),
  });
  const text = await response.text();
  const at = Date.now();
  if (response.status === 201)
    process.stdout.write(`${JSON.stringify({ id: (JSON.parse(text) as { id: number }).id, at })}\n`);
  else process.stdout.write(`${JSON.stringify({ status: response.status, text: text.slice(0, 200) })}\n`);
}

async function loop(): Promise<void> {
  while (Date.now() < deadline && sent < maxPosts) {
    sent += 1;
    await postOne(sent).catch((error: unknown) =>
      process.stdout.write(`${JSON.stringify({ status: 0, text: String(error) })}\n`),
    );
  }
}

await Promise.all(Array.from({ length: concurrency }, loop));
process.stdout.write(`${JSON.stringify({ done: true, sent })}\n`);
