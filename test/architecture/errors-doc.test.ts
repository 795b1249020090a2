import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Errors } from '@ens/core';
import { root } from './workspace-graph.ts';

/**
 * Callers test on codes, so the error reference (docs/reference/errors.md) must list every code
 * the registry (packages/core/src/errors.ts) can answer, with its status: a code added there and
 * not here fails, as does a status changed on one side only.
 */

const DOC = path.join(root, 'docs', 'reference', 'errors.md');

/** `| \`CODE\` | status | …` rows of the document. */
function documented(text: string): Map<string, number> {
  const rows = new Map<string, number>();
  for (const m of text.matchAll(/^\| `([A-Za-z_]+)` \| (\d{3}) \|/gm)) rows.set(m[1]!, Number(m[2]));
  return rows;
}

/** Every code and status the registry makes (each factory called with placeholder arguments). */
function registry(): Map<string, number> {
  const made = new Map<string, number>();
  for (const factory of Object.values(Errors) as ((...a: unknown[]) => { code: string; status: number })[]) {
    const e = factory('x', 'x', 'x', 'x');
    made.set(e.code, e.status);
  }
  return made;
}

t.test('the error reference lists every code the API answers, with its status', async (t) => {
  const doc = documented(readFileSync(DOC, 'utf8'));
  const made = registry();
  t.ok(made.size >= 15, `${made.size} codes in the registry`);
  for (const [code, status] of made) t.equal(doc.get(code), status, `${code} is documented as ${status}`);
  t.same([...doc.keys()].filter((c) => !made.has(c)), [], 'no documented code the registry does not make');
});

t.test('a code missing from the reference is caught', async (t) => {
  const text = readFileSync(DOC, 'utf8').replace(/^\| `ENS_ERR_TENANT_IN_USE` \|[^\n]*\n/m, '');
  t.equal(documented(text).get('ENS_ERR_TENANT_IN_USE'), undefined, 'the row is gone from the fixture');
  t.ok(registry().has('ENS_ERR_TENANT_IN_USE'), 'and the registry still makes it');
});
