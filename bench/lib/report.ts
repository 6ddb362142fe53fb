/** The bench's outputs: the machine, the table (stdout), JSON and a hand-written SVG chart. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface Machine {
  nproc: number;
  cpuModel: string;
  memoryGiB: number;
  os: string;
  node: string;
  redis: string;
  allocator: string;
  loadAverageStart: number[];
  loadAverageEnd: number[];
}

export interface Goal {
  /** What is compared: the ratio column, or the value itself. */
  on: 'ratio' | 'value';
  op: '<=' | '>=';
  limit: number;
  text: string;
}

export interface Row {
  group: string;
  metric: string;
  value: number | null;
  unit: string;
  baseline: number | null;
  baselineNote: string;
  ratio: number | null;
  goal: Goal | null;
  pass: boolean | null;
  /** What the chart draws (a ratio; the memory row draws bytes / budget) and its goal line. */
  chart: { ratio: number; goal: number | null; label: string } | null;
  error?: string;
}

export function machine(redisVersion: string, allocator: string, loadAverageStart: number[]): Machine {
  let nproc = os.availableParallelism();
  try {
    nproc = Number(execFileSync('nproc', { encoding: 'utf8' }).trim()) || nproc;
  } catch {
    // nproc missing: the Node count stands.
  }
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  let memoryGiB = os.totalmem() / 2 ** 30;
  try {
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? cpuModel;
    const kb = Number(/^MemTotal:\s*(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1]);
    if (kb > 0) memoryGiB = kb / 2 ** 20;
  } catch {
    // Not Linux: the os module's view stands.
  }
  return {
    nproc,
    cpuModel,
    memoryGiB: Math.round(memoryGiB * 10) / 10,
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    redis: redisVersion,
    allocator,
    loadAverageStart: loadAverageStart.map((n) => Math.round(n * 100) / 100),
    loadAverageEnd: os.loadavg().map((n) => Math.round(n * 100) / 100),
  };
}

export function machineLine(m: Machine): string {
  return `${m.nproc} × ${m.cpuModel}, ${m.memoryGiB} GiB RAM, ${m.os}, Node ${m.node}, Redis ${m.redis} (${m.allocator}); load average ${m.loadAverageStart[0]} at start, ${m.loadAverageEnd[0]} at end`;
}

function num(n: number | null, unit = ''): string {
  if (n === null || !Number.isFinite(n)) return '—';
  const abs = Math.abs(n);
  const text = abs >= 1000 ? Math.round(n).toLocaleString('en-US') : abs >= 100 ? n.toFixed(0) : abs >= 10 ? n.toFixed(1) : n.toFixed(2);
  return unit ? `${text} ${unit}` : text;
}

function ratioText(r: number | null): string {
  if (r === null || !Number.isFinite(r)) return '—';
  return r >= 100 ? `${Math.round(r).toLocaleString('en-US')}x` : `${r.toFixed(2)}x`;
}

export function evaluate(row: Row): Row {
  if (row.goal === null) return { ...row, pass: null };
  const subject = row.goal.on === 'ratio' ? row.ratio : row.value;
  if (subject === null || !Number.isFinite(subject)) return { ...row, pass: false };
  return { ...row, pass: row.goal.op === '<=' ? subject <= row.goal.limit : subject >= row.goal.limit };
}

/** A pipe table: aligned for the terminal, and valid Markdown as is. */
export function table(rows: Row[]): string {
  const header = ['metric', 'value', 'baseline', 'ratio', 'goal', 'result'];
  const body = rows.map((r) => [
    r.metric,
    r.error ? 'error' : num(r.value, r.unit),
    r.baselineNote ? (r.baseline === null ? r.baselineNote : `${num(r.baseline, r.unit)} ${r.baselineNote}`) : num(r.baseline, r.unit),
    ratioText(r.ratio),
    r.goal?.text ?? '',
    r.error ? `error: ${r.error}` : r.pass === null ? '' : r.pass ? 'pass' : '**FAIL**',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((cells) => cells[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i === 0 ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(header), rule, ...body.map(line)].join('\n');
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/**
 * Horizontal bars of the ratios on a log scale, one row per metric that has one, with each
 * goal as a vertical mark: green meets its goal, red misses it, grey has no goal.
 */
export function svg(rows: Row[], title: string, subtitle: string): string {
  const drawn = rows.filter((r) => r.chart !== null && Number.isFinite(r.chart.ratio) && r.chart.ratio > 0);
  const labelWidth = 330;
  const plotWidth = 520;
  const rowHeight = 22;
  const top = 64;
  const width = labelWidth + plotWidth + 110;
  const height = top + drawn.length * rowHeight + 46;
  const values = drawn.flatMap((r) => [r.chart!.ratio, r.chart!.goal ?? 1]);
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(0.1, ...values))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(10, ...values))));
  const x = (v: number) => labelWidth + ((Math.log10(v) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotWidth;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, sans-serif" font-size="12">`);
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  out.push(`<text x="12" y="22" font-size="15" font-weight="600">${escapeXml(title)}</text>`);
  out.push(`<text x="12" y="40" fill="#555">${escapeXml(subtitle)}</text>`);
  // Decade grid and axis labels.
  for (let v = lo; v <= hi * 1.0001; v *= 10) {
    const gx = x(v).toFixed(1);
    out.push(`<line x1="${gx}" y1="${top - 6}" x2="${gx}" y2="${top + drawn.length * rowHeight}" stroke="#e3e3e3"/>`);
    out.push(`<text x="${gx}" y="${top + drawn.length * rowHeight + 16}" text-anchor="middle" fill="#555">${v >= 1 ? `${v}x` : `${v.toPrecision(1)}x`}</text>`);
  }
  const one = x(1).toFixed(1);
  out.push(`<line x1="${one}" y1="${top - 6}" x2="${one}" y2="${top + drawn.length * rowHeight}" stroke="#999"/>`);
  drawn.forEach((r, i) => {
    const y = top + i * rowHeight;
    const colour = r.pass === null ? '#9e9e9e' : r.pass ? '#2e7d32' : '#c62828';
    const end = x(r.chart!.ratio);
    const start = x(lo);
    out.push(`<text x="${labelWidth - 8}" y="${y + 15}" text-anchor="end">${escapeXml(r.chart!.label)}</text>`);
    out.push(`<rect x="${start.toFixed(1)}" y="${y + 4}" width="${Math.max(1, end - start).toFixed(1)}" height="${rowHeight - 8}" fill="${colour}" opacity="0.85"/>`);
    const goalX = r.chart!.goal === null ? null : x(r.chart!.goal);
    if (goalX !== null) {
      out.push(`<line x1="${goalX.toFixed(1)}" y1="${y + 1}" x2="${goalX.toFixed(1)}" y2="${y + rowHeight - 1}" stroke="#111" stroke-width="2.5"/>`);
    }
    // The value goes after the bar or the goal mark, whichever ends later.
    const labelX = Math.max(end, goalX ?? 0) + 6;
    out.push(`<text x="${labelX.toFixed(1)}" y="${y + 15}" fill="#333">${escapeXml(ratioText(r.chart!.ratio))}</text>`);
  });
  const ly = top + drawn.length * rowHeight + 34;
  out.push(`<text x="12" y="${ly}" fill="#555">Bars: ratio (log scale). Black mark: goal. Green meets it, red misses it, grey: no goal at this size. Memory: bytes / 600 B budget.</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
