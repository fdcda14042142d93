import { SCHEDULES } from '../../../clients/verify/checks/limits-schedule.js';
import type { VerifyRun } from '../../../test/helpers/verify.js';

/** What verify must say of a target: `holds`, every check holds; otherwise the check that must be violated. */
export type Expectation = 'holds' | 'limits' | 'cursor' | 'ryw';

/** The runs of verify against one target, judged against what it must say. */
export class Tally {
  runs = 0;
  expected = 0;
  readonly requests: number[] = [];
  readonly seconds: number[] = [];
  /** The expected check's summary, in each run where it was violated. */
  readonly summaries: string[] = [];
  /** What the runs that did not give the expected verdict said instead (`limits violated`, `exit 4`), counted. */
  readonly instead = new Map<string, number>();

  constructor(readonly expect: Expectation) {}

  /** Counts one run; returns an excerpt of verify's output when the verdict was not the expected one. */
  record(run: VerifyRun, wallSeconds: number): string | undefined {
    this.runs++;
    this.requests.push(run.report.requests ?? 0);
    this.seconds.push((run.report as { seconds?: number }).seconds ?? wallSeconds);
    const { expect } = this;
    const check = run.report.checks.find((c) => c.name === expect);
    const ok =
      expect === 'holds'
        ? run.code === 0 && run.report.checks.length > 0 && run.report.checks.every((c) => c.verdict === 'holds')
        : check?.verdict === 'violated';
    if (check?.verdict === 'violated') this.summaries.push(check.summary);
    if (ok) {
      this.expected++;
      return undefined;
    }
    const said = run.report.checks.filter((c) => (expect === 'holds' ? c.verdict !== 'holds' : c.name === expect));
    const ended = run.code === null ? 'killed at the 180-s deadline' : `exit ${run.code}`;
    for (const what of said.length > 0 ? said.map((c) => `${c.name} ${c.verdict}`) : [ended])
      this.instead.set(what, (this.instead.get(what) ?? 0) + 1);
    const lines = run.output.trim().split('\n');
    const verdicts = lines.filter((line) => /^(holds|violated|skipped)\s/.test(line) || line.startsWith('verify'));
    return [...(verdicts.length > 0 ? verdicts : lines.slice(-10)), `(${ended})`].join('\n');
  }

  /**
   * What the runs found: each kind of problem of the expected check with its range and the runs that showed it,
   * then (limits) in how many runs each schedule exposed it.
   */
  findings(): string {
    const instead = [...this.instead].map(([what, runs]) => `${what} (${runs})`).join(', ');
    if (this.expect === 'holds')
      return this.expected === this.runs ? 'every check held in every run' : `instead: ${instead}; see below`;
    const missed = instead === '' ? '' : `; not found in ${this.runs - this.expected} runs: ${instead}`;
    if (this.summaries.length === 0) return `never violated${missed}`;
    const kinds = new Map<string, { runs: number; min: number; max: number }>();
    const schedules = new Map<string, number>();
    for (const summary of this.summaries) {
      const problems = this.expect === 'limits' ? summary.replace(/^[^:]*: /, '').split('; ') : [summary];
      for (const problem of problems) {
        const [, count = '0', rest = problem] = /^(\d+) (.*?)(?:, exposed by .*| \(first, .*)?$/.exec(problem) ?? [];
        const kind = kinds.get(rest) ?? { runs: 0, min: Infinity, max: -Infinity };
        kinds.set(rest, { runs: kind.runs + 1, min: Math.min(kind.min, +count), max: Math.max(kind.max, +count) });
      }
      for (const phrase of Object.values(SCHEDULES))
        if (summary.includes(phrase)) schedules.set(phrase, (schedules.get(phrase) ?? 0) + 1);
    }
    const n = this.summaries.length;
    const range = (k: { min: number; max: number }) => (k.min === k.max ? `${k.min}` : `${k.min}–${k.max}`);
    const found = [...kinds].map(([rest, k]) => `${range(k)} ${rest}${k.runs < n ? ` (${k.runs} runs)` : ''}`);
    const exposed = [...schedules].map(([phrase, runs]) => `${phrase} (${runs})`);
    return found.join('; ') + (exposed.length > 0 ? `; exposed by ${exposed.join(', ')}` : '') + missed;
  }
}
