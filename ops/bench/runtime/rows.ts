import { checkRow, loadOf, PAGE_1_ROW, rowSpecs, type RowSpec } from '../read-path/rows.js';
import type { Load } from '../harness/send.js';
import type { Tree } from '../harness/service.js';

/** One runtime's processes, and what the write row sends. */
export interface Targets {
  trees: Record<Server, Tree>;
  writerToken: string;
  /** The read-path bench's wrk Lua script that makes each request a POST with a JSON body. */
  postScript: string;
}

export type Server = 'bare' | 'bareKoa' | 'service';
export type Row = RowSpec & { server: Server };

/** The read-path bench's rows that run on both runtimes, as it loads them. */
const NAMES = [rowSpecs(0)[0]!.name, rowSpecs(0)[1]!.name, PAGE_1_ROW, 'health', 'writes, authenticated'];
export const ROWS = rowSpecs(0).filter((spec) => NAMES.includes(spec.name)) as Row[];

/** What wrk sends for `row` to the runtime of `targets`. */
export const loadOfRow = (row: Row, { trees, writerToken, postScript }: Targets): Load =>
  loadOf(row, {
    bases: { bare: trees.bare.base, bareKoa: trees.bareKoa.base, service: trees.service.base },
    writerToken,
    postScript,
    tasks: 0,
  });

/** Sends the row's request once, so a row that answers the wrong status stops the run before measuring. */
export const checkRuntimeRow = (row: Row, targets: Targets): Promise<void> => checkRow(row, loadOfRow(row, targets));
