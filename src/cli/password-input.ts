import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';

/** A new password, or why there is none (one line for the operator). */
export type PasswordInput = { ok: true; password: string } | { ok: false; error: string };

/**
 * The password for `user:create` and `user:set-password`: $PASSWORD, else typed at a prompt on a
 * terminal (not echoed), else the first line of stdin. At least 8 characters.
 */
export async function readNewPassword(username: string): Promise<PasswordInput> {
  const password =
    process.env.PASSWORD ??
    (process.stdin.isTTY ? await prompt(`Password for ${username}: `) : await firstLineOfStdin());
  if (password === null)
    return { ok: false, error: 'no password: set PASSWORD, type it at the prompt, or pipe it on stdin' };
  if (password.length < 8) return { ok: false, error: 'the password must have at least 8 characters' };
  return { ok: true, password };
}

/** The first line of a piped stdin, without its line ending; null when stdin is empty. */
async function firstLineOfStdin(): Promise<string | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  if (text === '') return null;
  return text.split(/\r?\n/)[0] ?? '';
}

/**
 * Asks on stderr and reads one line from the terminal without echoing it: readline runs the
 * terminal in raw mode (no echo by the terminal) and writes its own echo to `output`, which here
 * discards everything. The question itself goes to stderr directly.
 */
function prompt(question: string): Promise<string> {
  const muted = new Writable({ write: (_chunk, _encoding, done) => done() });
  const rl = createInterface({ input: process.stdin, output: muted, terminal: true });
  process.stderr.write(question);
  return new Promise((resolveAnswer) => {
    rl.question('', (answer) => {
      rl.close();
      process.stderr.write('\n');
      resolveAnswer(answer);
    });
  });
}
