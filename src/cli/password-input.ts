import { createInterface } from 'node:readline';

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

function prompt(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: process.stdin.isTTY });
  return new Promise((resolveAnswer) => {
    if (process.stdin.isTTY) {
      // Echo nothing while the password is typed.
      (rl as unknown as { _writeToOutput: (s: string) => void })._writeToOutput = (s) => {
        if (s.includes(question)) process.stderr.write(question);
      };
    }
    rl.question(question, (answer) => {
      rl.close();
      if (process.stdin.isTTY) process.stderr.write('\n');
      resolveAnswer(answer);
    });
  });
}
