import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/http/server.js';
import { Harness } from '../helpers/harness.js';
import { REPO_ROOT } from '../helpers/processes.js';
import { fetchMetrics, parseScrape, type Scrape } from '../metrics/prometheus.js';

/**
 * deploy/grafana/versus-dashboard.json: importable (a Prometheus datasource variable, every
 * query on it), every metric it queries is one the API and the worker really serve at
 * /metrics, and every versus_ metric they serve has a panel.
 */
interface Target {
  expr: string;
  datasource?: { type?: string; uid?: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  gridPos?: { h: number; w: number; x: number; y: number };
}
interface Variable {
  name: string;
  type: string;
  query: unknown;
  datasource?: { uid?: string };
}

const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, 'deploy', 'grafana', 'versus-dashboard.json'), 'utf8')) as {
  title: string;
  uid: string;
  panels: Panel[];
  templating: { list: Variable[] };
};

/** PromQL words that are not metric names. */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'and', 'or', 'unless', 'inf', 'nan']);

/** The metric names a PromQL expression reads: identifiers outside label matchers, ranges and grouping clauses, not called as functions. */
function metricNames(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names: string[] = [];
  for (const match of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const word = match[0];
    const after = stripped.slice(match.index! + word.length).trimStart();
    if (after.startsWith('(') || KEYWORDS.has(word.toLowerCase())) continue;
    names.push(word);
  }
  return names;
}

/** The family a sample name belongs to (`x_bucket` of histogram `x` is `x`), when the scrape declares it. */
function familyOf(name: string, scrape: Scrape): string | undefined {
  if (scrape.types.has(name)) return name;
  const base = /^(.*)_(bucket|sum|count)$/.exec(name)?.[1];
  if (base !== undefined && ['histogram', 'summary'].includes(scrape.types.get(base) ?? '')) return base;
  return undefined;
}

const targets = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));
const queried = new Set(targets.flatMap((t) => metricNames(t.expr)));

let h: Harness;
let worker: RunningServer;
let api: Scrape;
let workerScrape: Scrape;

beforeAll(async () => {
  h = await Harness.start();
  worker = await startServer(h.config, { role: 'worker', port: 0, host: '127.0.0.1' });
  // One request first, so the HTTP metrics have samples as well as their declarations.
  expect((await fetch(`${h.url}/healthz`)).status).toBe(200);
  api = parseScrape((await fetchMetrics(h.url)).text);
  workerScrape = parseScrape((await fetchMetrics(worker.url)).text);
});
afterAll(async () => {
  await worker?.close();
  await h?.stop();
});

describe('Grafana dashboard', () => {
  it('has a Prometheus datasource variable that every panel and query uses, unique panel ids and a layout', () => {
    expect(dashboard.title).toBe('Versus');
    const datasource = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(datasource).toMatchObject({ name: 'datasource', query: 'prometheus' });
    const ref = { type: 'prometheus', uid: '${datasource}' };
    const queryPanels = dashboard.panels.filter((p) => p.type !== 'row');
    expect(queryPanels.length).toBeGreaterThan(10);
    for (const panel of queryPanels) {
      expect(panel.datasource, panel.title).toEqual(ref);
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) expect(target.datasource, panel.title).toEqual(ref);
      expect(panel.gridPos, panel.title).toBeDefined();
    }
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const variable of dashboard.templating.list.filter((v) => v.type === 'query')) expect(variable.datasource, variable.name).toEqual(ref);
  });

  it('reads metric names the way PromQL does', () => {
    expect(metricNames('histogram_quantile(0.99, sum by (le, route) (rate(versus_http_request_duration_seconds_bucket{code!="ok"}[$__rate_interval])))')).toEqual([
      'versus_http_request_duration_seconds_bucket',
    ]);
    expect(metricNames('2 * sum(max by (app) (increase(a_total{app=~"$app"}[1h]))) / clamp_min(b_total, 1)')).toEqual(['a_total', 'b_total']);
    expect(metricNames('count(versus_stats_up == 0)')).toEqual(['versus_stats_up']);
  });

  it('queries only metrics that the API and the worker serve at /metrics', () => {
    expect(queried.size).toBeGreaterThan(15);
    for (const name of queried) {
      expect(familyOf(name, api), `${name} on the API`).toBeDefined();
      expect(familyOf(name, workerScrape), `${name} on the worker`).toBeDefined();
    }
  });

  it('shows every versus_ metric, including the HTTP request metrics, and the app variable reads a real label', () => {
    const families = new Set([...queried].map((name) => familyOf(name, api)));
    const served = [...api.types.keys()].filter((name) => name.startsWith('versus_'));
    expect(served).toEqual(expect.arrayContaining(['versus_http_requests_total', 'versus_http_request_duration_seconds']));
    for (const name of served) expect(families.has(name), name).toBe(true);
    const app = dashboard.templating.list.find((v) => v.name === 'app');
    expect(JSON.stringify(app?.query)).toContain('label_values(versus_matchmaking_admissions_total, app)');
  });
});
