import { readFileSync } from 'node:fs';
import t from 'tap';
import { parse } from 'yaml';
import { metricsRegistry } from '@ens/core';
// The internal entry registers the gauges that live with the machinery (backlog age, consumer up).
import '@ens/core/internal';
import { BACKLOG_WARN_SECONDS } from '../src/queries/backlog.ts';

/**
 * deploy/prometheus/ens-alerts.yml only names metrics and labels that ENS exports, so a renamed
 * metric cannot leave an operator with a rule that never fires; and its backlog threshold is the
 * console's.
 */

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

const file = new URL('../../../deploy/prometheus/ens-alerts.yml', import.meta.url);
const doc = parse(readFileSync(file, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
const rules = doc.groups.flatMap((g) => g.rules);
const exported = new Set((await metricsRegistry.getMetricsAsJSON()).map((m) => m.name));
// Labels Prometheus adds to every scraped series.
const TARGET_LABELS = ['instance', 'job'];

function labelNamesOf(metric: string): string[] {
  const m = metricsRegistry.getSingleMetric(metric) as unknown as
    | { labelNames?: string[] }
    | undefined;
  return m?.labelNames ?? [];
}

t.test('the default rules are there', async (t) => {
  t.same(rules.map((r) => r.alert).sort(), ['EnsBacklogAging', 'EnsConsumerDown']);
  for (const r of rules) {
    t.equal(r.for, '1m', `${r.alert} waits a minute`);
    t.equal(r.labels?.severity, 'warning', `${r.alert} severity`);
    t.ok(r.annotations?.summary, `${r.alert} has a summary`);
    t.ok(r.annotations?.description, `${r.alert} has a description`);
  }
});

t.test('every metric and label a rule uses is exported by ENS', async (t) => {
  for (const r of rules) {
    const metrics = [...r.expr.matchAll(/\bens_[a-z0-9_]+\b/g)].map((m) => m[0]);
    t.not(metrics.length, 0, `${r.alert} uses an ENS metric`);
    const labels = new Set([...TARGET_LABELS, ...metrics.flatMap(labelNamesOf)]);
    for (const name of metrics)
      t.ok(exported.has(name), `${r.alert}: ${name} is in the metrics registry`);
    for (const by of r.expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) {
      for (const label of by[1]!
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean))
        t.ok(labels.has(label), `${r.alert}: label ${label} in the expression exists`);
    }
    const text = Object.values(r.annotations ?? {}).join('\n');
    for (const used of text.matchAll(/\$labels\.([a-zA-Z_]+)/g))
      t.ok(labels.has(used[1]!), `${r.alert}: label ${used[1]} in the annotations exists`);
  }
});

t.test('the backlog rule warns at the console threshold', async (t) => {
  const aging = rules.find((r) => r.alert === 'EnsBacklogAging')!;
  t.match(aging.expr, /ens_backlog_age_seconds/);
  t.equal(Number(/>\s*(\d+(?:\.\d+)?)\s*$/.exec(aging.expr)?.[1]), BACKLOG_WARN_SECONDS);
  t.equal(rules.find((r) => r.alert === 'EnsConsumerDown')!.expr.trim(), 'ens_consumer_up == 0');
});
