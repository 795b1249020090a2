import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { anchorsOf, brokenLinks, linksOf, markdownFiles } from './doc-links.ts';
import { root } from './workspace-graph.ts';

/**
 * The documentation is many files that point at each other (docs/README.md is the index): every
 * relative link in every Markdown file of the repository must reach a file that exists, and every
 * `#anchor` a heading of its target, as GitHub makes them. A section renamed or a file moved
 * without its links fails here, with the file, line and link.
 */

t.test('every relative link and anchor in the documentation resolves', async (t) => {
  const files = markdownFiles(root);
  for (const f of [
    'README.md',
    'docs/README.md',
    'docs/reference/configuration.md',
    'docs/performance.md',
  ]) {
    t.ok(files.includes(f), `${f} is among the files checked`);
  }
  const links = files.reduce((n, f) => n + linksOf(readText(f)).length, 0);
  t.ok(links > 100, `${links} links read in ${files.length} files`);
  const broken = brokenLinks(root, files).map(
    (b) => `${b.file}:${b.line}: (${b.href}) ${b.problem}`,
  );
  t.same(broken, [], 'no broken link');
});

t.test('the README stays a front door', async (t) => {
  const lines = readText('README.md').split('\n').length;
  t.ok(lines <= 200, `README.md has ${lines} lines (at most 200; the rest belongs in docs/)`);
});

t.test(
  'a broken file, a broken anchor and a link out of the repository are each found',
  async (t) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'ens-doc-links-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    mkdirSync(path.join(dir, 'guides'));
    writeFileSync(
      path.join(dir, 'guides', 'target.md'),
      [
        '# Target',
        '## Every core (`ENS_PROCESSES`)',
        '## Same',
        '## Same',
        '## Addresses a client chose: `context.outbound`',
        '<a name="by-hand"></a>',
        '',
      ].join('\n'),
    );
    writeFileSync(
      path.join(dir, 'index.md'),
      [
        '# Index',
        '',
        '## Local heading',
        '',
        '[ok](guides/target.md#every-core-ens_processes) [repeat](guides/target.md#same-1) ' +
          '[colon](guides/target.md#addresses-a-client-chose-contextoutbound)',
        '[html anchor](guides/target.md#by-hand) [folder](guides) [self](#local-heading) ' +
          '[web](https://example.com/nope.md) [mail](mailto:a@example.com)',
        '[no file](guides/missing.md) [no anchor](guides/target.md#nothing) [third ' +
          'repeat](guides/target.md#same-2) [self, no anchor](#nope)',
        '[outside](../elsewhere.md) [by reference][ref] <a href="gone.html">html link</a>',
        '',
        '`[in a code span](ghost.md)`',
        '',
        '```',
        '[in a fenced block](ghost.md)',
        '```',
        '',
        '[ref]: guides/gone.md',
        '',
      ].join('\n'),
    );
    t.same(
      brokenLinks(dir, ['index.md']).map((b) => [b.href, b.problem]),
      [
        ['guides/missing.md', `${path.join('guides', 'missing.md')} does not exist`],
        [
          'guides/target.md#nothing',
          `${path.join('guides', 'target.md')} has no heading with the anchor #nothing`,
        ],
        [
          'guides/target.md#same-2',
          `${path.join('guides', 'target.md')} has no heading with the anchor #same-2`,
        ],
        ['#nope', 'index.md has no heading with the anchor #nope'],
        ['../elsewhere.md', 'points outside the repository'],
        ['guides/gone.md', `${path.join('guides', 'gone.md')} does not exist`],
        ['gone.html', 'gone.html does not exist'],
      ],
    );
  },
);

t.test("anchors are GitHub's slugs", async (t) => {
  t.same(
    [
      ...anchorsOf(
        '# The operations console (`/ops/`)\n## Traces (OpenTelemetry)\n### Decisions where ' +
          'the spec is silent\n## Fail-over\n## Fail-over\n',
      ),
    ],
    [
      'the-operations-console-ops',
      'traces-opentelemetry',
      'decisions-where-the-spec-is-silent',
      'fail-over',
      'fail-over-1',
    ],
  );
});

function readText(file: string): string {
  return readFileSync(path.join(root, file), 'utf8');
}
