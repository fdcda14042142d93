/**
 * The walk oracle (docs/verify.md "Cursor walks lose nothing"), Jepsen `set-full` style per element: a
 * task the run created is one element, with the times its create was sent and acknowledged and, when
 * deleted, the times its delete was sent and acknowledged (nanoseconds).
 */
export interface Element {
  id: number;
  createInvoke: number;
  createAck: number;
  deleteInvoke?: number;
  deleteAck?: number;
}

export interface WalkPage {
  invoke: number;
  complete: number;
  ids: number[];
}

export type WalkStyle = 'cursor ascending' | 'cursor descending' | 'page number' | 'limit/offset';

export interface WalkFindings {
  style: WalkStyle;
  pages: number;
  /** Elements that existed when the walk began and were not deleted before it ended. */
  expected: number;
  seen: number;
  missing: number[];
  duplicates: number[];
  outOfOrder: number[];
  /** Elements whose delete was acknowledged before the walk began, yet were listed. */
  resurrected: number[];
  /** Ascending walks: elements acknowledged before the last page was asked for, yet never listed. */
  lateMissed: number[];
}

/** Judges one walk against the run's elements; ids of other clients' tasks are ignored. */
export function analyseWalk(style: WalkStyle, pages: WalkPage[], elements: Map<number, Element>): WalkFindings {
  const start = pages[0]?.invoke ?? 0;
  const end = pages.at(-1)?.complete ?? 0;
  const lastAsked = pages.at(-1)?.invoke ?? 0;
  const listed = pages.flatMap((page) => page.ids).filter((id) => elements.has(id));
  const counts = new Map<number, number>();
  for (const id of listed) counts.set(id, (counts.get(id) ?? 0) + 1);
  const alive = (e: Element, until: number) => e.deleteInvoke === undefined || e.deleteInvoke > until;
  const expected = [...elements.values()].filter((e) => e.createAck < start && alive(e, end));
  const descending = style === 'cursor descending';
  const outOfOrder = listed.filter((id, i) => i > 0 && (descending ? id >= listed[i - 1]! : id <= listed[i - 1]!));
  const late =
    style === 'cursor ascending'
      ? [...elements.values()].filter((e) => e.createAck >= start && e.createAck < lastAsked && alive(e, end))
      : [];
  return {
    style,
    pages: pages.length,
    expected: expected.length,
    seen: counts.size,
    missing: expected.filter((e) => !counts.has(e.id)).map((e) => e.id),
    duplicates: [...counts].filter(([, n]) => n > 1).map(([id]) => id),
    outOfOrder: style.startsWith('cursor') ? outOfOrder : [],
    resurrected: listed.filter((id) => (elements.get(id)!.deleteAck ?? Infinity) < start),
    lateMissed: late.filter((e) => !counts.has(e.id)).map((e) => e.id),
  };
}

/** Whether a walk breaks the cursor guarantee (page-number and limit/offset walks never do: see docs). */
export function breaksGuarantee(findings: WalkFindings): boolean {
  if (!findings.style.startsWith('cursor')) return false;
  return (
    findings.missing.length +
      findings.duplicates.length +
      findings.outOfOrder.length +
      findings.resurrected.length +
      findings.lateMissed.length >
    0
  );
}
