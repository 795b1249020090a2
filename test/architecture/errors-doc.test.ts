import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { Errors } from '@ens/core';
import { answerCodes, generated, sourceFiles } from '../../scripts/errors-doc.ts';
import { root } from './workspace-graph.ts';

/**
 * Callers test on codes, so the error reference (docs/reference/errors.md) must list every code
 * the registry (packages/core/src/errors.ts) can answer, with its status: a code added there and
 * not here fails, as does a status changed on one side only. Its tables are generated
 * (`npm run errors-doc`, scripts/errors-doc.ts) from the registry's doc comments and the error
 * classes, so a stale document fails too, and so does any error code the source uses that the
 * document lacks, answer or not.
 */

const DOC = path.join(root, 'docs', 'reference', 'errors.md');

/** `| \`CODE\` | status | …` rows of the document. */
function documented(text: string): Map<string, number> {
  const rows = new Map<string, number>();
  for (const m of text.matchAll(/^\| `([A-Za-z_]+)` \| (\d{3}) \|/gm))
    rows.set(m[1]!, Number(m[2]));
  return rows;
}

/** Every code and status the registry makes (each factory called with placeholder arguments). */
function registry(): Map<string, number> {
  const made = new Map<string, number>();
  for (const factory of Object.values(Errors) as ((...a: unknown[]) => {
    code: string;
    status: number;
  })[]) {
    const e = factory('x', 'x', 'x', 'x');
    made.set(e.code, e.status);
  }
  return made;
}

t.test('the error reference lists every code the API answers, with its status', async (t) => {
  const doc = documented(readFileSync(DOC, 'utf8'));
  const made = registry();
  t.ok(made.size >= 15, `${made.size} codes in the registry`);
  for (const [code, status] of made)
    t.equal(doc.get(code), status, `${code} is documented as ${status}`);
  t.same(
    [...doc.keys()].filter((c) => !made.has(c)),
    [],
    'no documented code the registry does not make',
  );
});

t.test('a code missing from the reference is caught', async (t) => {
  const text = readFileSync(DOC, 'utf8').replace(/^\| `ENS_ERR_TENANT_IN_USE` \|[^\n]*\n/m, '');
  t.equal(
    documented(text).get('ENS_ERR_TENANT_IN_USE'),
    undefined,
    'the row is gone from the fixture',
  );
  t.ok(registry().has('ENS_ERR_TENANT_IN_USE'), 'and the registry still makes it');
});

/** Every code in the document's tables, answers or not. */
const allDocumented = (text: string) =>
  new Set([...text.matchAll(/^\| `([A-Za-z0-9_]+)` \|/gm)].map((m) => m[1]!));

t.test('the reference is the generated one (run `npm run errors-doc`)', async (t) => {
  const doc = readFileSync(DOC, 'utf8');
  t.equal(generated(doc), doc);
});

t.test('every error code the source uses is in the reference', async (t) => {
  const doc = allDocumented(readFileSync(DOC, 'utf8'));
  const used = new Map<string, string>();
  for (const file of sourceFiles()) {
    const text = readFileSync(file, 'utf8');
    const codes = [
      ...[...text.matchAll(/static (?:override )?readonly code: string = '([^']+)'/g)].map(
        (m) => m[1]!,
      ),
      ...[...text.matchAll(/['`](ENS_ERR_[A-Z0-9_]+)['`]/g)].map((m) => m[1]!),
    ];
    for (const c of codes) if (!used.has(c)) used.set(c, path.relative(root, file));
  }
  t.ok(used.size >= 40, `${used.size} codes found in the source`);
  t.same(
    [...used].filter(([c]) => !doc.has(c)).map(([c, file]) => `${c} (${file})`),
    [],
    'each is documented',
  );
});

t.test('each factory of the registry says when the API answers it', async (t) => {
  const rows = answerCodes();
  t.equal(rows.length, Object.keys(Errors).length);
  for (const r of rows) t.ok(r.when.length >= 10, `Errors.${r.factory}: ${r.when}`);
});

t.test('a factory without a doc comment is refused by name', async (t) => {
  const source = `export const Errors = {
  /** the documented case. */
  told: () => new HttpError('ENS_ERR_TOLD', 400, 'x'),
  untold: () => new HttpError('ENS_ERR_UNTOLD', 400, 'x'),
} as const;`;
  const registry = {
    told: () => ({ code: 'ENS_ERR_TOLD', status: 400 }),
    untold: () => ({ code: 'ENS_ERR_UNTOLD', status: 400 }),
  };
  t.throws(
    () => answerCodes(source, registry),
    /Errors\.untold \(ENS_ERR_UNTOLD\).*no doc comment/,
  );
  t.same(
    answerCodes(source.replace('  untold:', '  /** the other case. */\n  untold:'), registry).map(
      (r) => r.when,
    ),
    ['the documented case', 'the other case'],
  );
});

t.test('a stale reference is caught', async (t) => {
  const doc = readFileSync(DOC, 'utf8');
  const reworded = doc.replace('| an unknown tenant |', '| a tenant nobody knows |');
  t.not(reworded, doc, 'the fixture changes a row');
  t.equal(generated(reworded), doc, "the generator writes the registry's words back");
  const lacking = doc.replace(/^\| `ENS_ERR_STOPPED` \|[^\n]*\n/m, '');
  t.not(lacking, doc, 'the fixture drops a row');
  t.equal(generated(lacking), doc, 'and the generator puts it back');
});
