/**
 * A reason to end the run before judging anything, as one line for the user, with its exit status
 * (docs/verify.md "Exit status"): 2 for a bad command line, a service that cannot be reached, a login
 * refused or a token the service does not take as its user.
 */
export class Stop extends Error {
  constructor(
    message: string,
    readonly exitCode = 2,
  ) {
    super(message);
    this.name = 'Stop';
  }
}
