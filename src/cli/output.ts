/** A line for the operator on stdout; 0, the exit status of a command done. */
export function say(line: string): number {
  process.stdout.write(`${line}\n`);
  return 0;
}

/** `paceline: <message>` on stderr; 1, the exit status of a command refused. */
export function fail(message: string): number {
  process.stderr.write(`paceline: ${message}\n`);
  return 1;
}
