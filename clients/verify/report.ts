import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CheckResult, Plot } from './context.js';

export interface Report {
  tool: 'paceline verify';
  runId: string;
  base: string;
  startedAt: string;
  seconds: number;
  requests: number;
  verdict: 'holds' | 'violated' | 'skipped';
  checks: CheckResult[];
}

/** Writes `report.json` and a self-contained `report.html` (inline SVG, no scripts) into `dir`. */
export async function writeReport(dir: string, report: Report): Promise<void> {
  await mkdir(dir, { recursive: true });
  const json = { ...report, checks: report.checks.map(({ plot: _plot, ...check }) => check) };
  await writeFile(join(dir, 'report.json'), `${JSON.stringify(json, null, 2)}\n`);
  await writeFile(join(dir, 'report.html'), renderHtml(report));
}

const COLOURS = { holds: '#1a7f37', violated: '#cf222e', skipped: '#9a6700' };
const SERIES = ['#0969da', '#bf3989', '#8250df', '#1a7f37', '#bc4c00'];

function escape(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
}

function renderHtml(report: Report): string {
  const rows = report.checks
    .map(
      (c) =>
        `<tr><td>${c.name}</td><td style="color:${COLOURS[c.verdict]}"><b>${c.verdict}</b></td><td>${escape(c.summary)}</td><td>${c.requests}</td><td>${c.seconds.toFixed(1)}</td></tr>`,
    )
    .join('');
  const sections = report.checks
    .map((c) => {
      const plot = c.plot ? renderPlot(c.plot) : '';
      const evidence = escape(JSON.stringify(c.evidence, null, 2).slice(0, 20_000));
      return `<h2 id="${c.name}">${c.name}: <span style="color:${COLOURS[c.verdict]}">${c.verdict}</span></h2><p>${escape(c.summary)}</p>${plot}<details><summary>Evidence</summary><pre>${evidence}</pre></details>`;
    })
    .join('');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>verify ${escape(report.runId)}: ${report.verdict}</title>
<style>body{font:15px/1.45 system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#1f2328}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d0d7de;padding:.4em;text-align:left;vertical-align:top}
pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}svg{background:#fff;border:1px solid #d0d7de}</style></head><body>
<h1>paceline verify: <span style="color:${COLOURS[report.verdict]}">${report.verdict}</span></h1>
<p>Service <code>${escape(report.base)}</code>, run <code>${escape(report.runId)}</code>, started ${escape(report.startedAt)},
${report.seconds.toFixed(1)} s, ${report.requests} requests.</p>
<table><tr><th>check</th><th>verdict</th><th>what was seen</th><th>requests</th><th>seconds</th></tr>${rows}</table>${sections}</body></html>\n`;
}

/** A small SVG chart: lines or grouped bars, axes with a few ticks, an optional level line. */
export function renderPlot(plot: Plot): string {
  const [w, h, left, bottom, right] = [880, 300, 50, 48, 20];
  const points = plot.series.flatMap((s) => s.points);
  if (points.length === 0) return '';
  const bars = plot.kind === 'bars';
  const maxX = Math.max(...points.map(([x]) => x), 1);
  const minX = bars ? 0 : Math.min(...points.map(([x]) => x));
  const maxY = Math.max(...points.map(([, y]) => y), plot.level?.y ?? 0, 1) * 1.1;
  const plotW = w - left - right;
  const sx = (x: number) => left + ((x - minX) / (maxX - minX || 1)) * plotW;
  const sy = (y: number) => h - bottom - (y / maxY) * (h - bottom - 20);
  const parts: string[] = [];
  for (let i = 0; i <= 4; i++) {
    const y = (maxY / 4) * i;
    parts.push(`<line x1="${left}" x2="${w - right}" y1="${sy(y)}" y2="${sy(y)}" stroke="#eee"/>`);
    parts.push(`<text x="${left - 6}" y="${sy(y) + 4}" text-anchor="end" font-size="11">${Math.round(y)}</text>`);
  }
  const slot = plotW / maxX;
  const barW = (slot * 0.8) / plot.series.length;
  const tickX = (x: number) => (bars ? left + (x - 0.5) * slot : sx(x));
  const ticks = bars
    ? points.map(([x]) => x).filter((x, i, all) => all.indexOf(x) === i)
    : [0, 1, 2, 3, 4].map((i) => minX + ((maxX - minX) / 4) * i);
  for (const x of ticks) {
    const label = plot.xLabels?.[x - 1] ?? (Number.isInteger(x) ? String(x) : x.toFixed(1));
    parts.push(
      `<text x="${tickX(x)}" y="${h - bottom + 16}" text-anchor="middle" font-size="11">${escape(bars ? label : x.toFixed(1))}</text>`,
    );
  }
  plot.series.forEach((s, i) => {
    const colour = SERIES[i % SERIES.length];
    if (!bars) {
      const d = s.points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join('');
      parts.push(`<path d="${d}" fill="none" stroke="${colour}" stroke-width="1.5"/>`);
    } else {
      for (const [x, y] of s.points) {
        const x0 = left + (x - 1) * slot + slot * 0.1 + i * barW;
        parts.push(
          `<rect x="${x0.toFixed(1)}" y="${sy(y)}" width="${barW.toFixed(1)}" height="${sy(0) - sy(y)}" fill="${colour}"/>`,
        );
      }
    }
    parts.push(`<text x="${left + 10 + i * 160}" y="14" font-size="12" fill="${colour}">■ ${escape(s.name)}</text>`);
  });
  if (plot.level) {
    const y = sy(plot.level.y);
    parts.push(`<line x1="${left}" x2="${w - right}" y1="${y}" y2="${y}" stroke="#cf222e" stroke-dasharray="6 4"/>`);
    parts.push(
      `<text x="${w - right - 4}" y="${y - 4}" text-anchor="end" font-size="11" fill="#cf222e">${escape(plot.level.name)}</text>`,
    );
  }
  parts.push(`<text x="${w / 2}" y="${h - 8}" text-anchor="middle" font-size="12">${escape(plot.xLabel)}</text>`);
  parts.push(
    `<text x="12" y="${h / 2}" font-size="12" transform="rotate(-90 12 ${h / 2})" text-anchor="middle">${escape(plot.yLabel)}</text>`,
  );
  const label = escape(plot.title);
  return `<figure><svg viewBox="0 0 ${w} ${h}" width="100%" role="img" aria-label="${label}">${parts.join('')}</svg><figcaption>${label}</figcaption></figure>`;
}
