import { readFileSync } from 'node:fs';
import t from 'tap';
import { loadConfig } from '@ens/core';
import { allVariables } from '@ens/core/internal';
import { CONFIG_DOC, configTable, END, START, withTable } from '../../scripts/config-table.ts';

/**
 * One declaration per variable (packages/core/src/config/variables.ts), and the table of the
 * configuration reference (docs/reference/configuration.md) is that list: a variable added,
 * removed or re-described there without `npm run config-table` fails here.
 */
t.test('the configuration reference lists exactly the declared variables', async (t) => {
  const doc = readFileSync(CONFIG_DOC, 'utf8');
  t.ok(
    doc.includes(START) && doc.includes(END),
    'the configuration reference has the generated block',
  );
  t.equal(
    withTable(doc, configTable()),
    doc,
    'its table is the generated one (run `npm run config-table`)',
  );
  t.notOk(
    readFileSync(new URL('../../README.md', import.meta.url), 'utf8').includes(START),
    'the README links to it rather than keeping a copy',
  );
});

t.test('every declaration is complete and named once', async (t) => {
  const vars = allVariables();
  const names = vars.map((v) => v.name);
  t.same(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
    'no variable is declared twice',
  );
  for (const v of vars) {
    t.match(
      v.name,
      /^(ENS_[A-Z0-9_]+|OTEL_[A-Z0-9_]+|PORT|HOST|DATABASE_URL|NATS_URL)$/,
      `${v.name}: an ENS_ name, OpenTelemetry's own, or one of the conventional four`,
    );
    t.ok(v.doc.length > 10, `${v.name} says what it is for`);
    t.ok(v.shownDefault.length > 0, `${v.name} shows its default`);
  }
});

t.test('a stale table is caught', async (t) => {
  const doc = readFileSync(CONFIG_DOC, 'utf8');
  const stale = doc.replace(/\| `ENS_LEASE` \|[^\n]*\n/, '');
  t.not(stale, doc, 'the fixture removed a row');
  t.not(
    withTable(stale, configTable()),
    stale,
    'a table missing a row differs from the generated one',
  );
});

t.test('each documented default is the value the code uses', async (t) => {
  const unset = loadConfig({});
  let checked = 0;
  for (const v of allVariables()) {
    const shown = /^`([^`]*)`/.exec(v.shownDefault)?.[1];
    // S3 and console variables are refused without their section (ENS_MEDIA_STORE=s3,
    // ENS_OPS_ISSUER); ENS_PUBLIC_URL's default is a pattern of other variables, not a value.
    if (!shown || /^ENS_(S3|OPS)_/.test(v.name) || shown.includes('HOST')) continue;
    t.same(loadConfig({ [v.name]: shown }), unset, `${v.name}=${shown} reads as leaving it unset`);
    checked++;
  }
  t.ok(checked >= 20, `${checked} defaults checked`);
});
