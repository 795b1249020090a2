import t from 'tap';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { startTestService } from '../harness/service.ts';
import { bundleEns, ensJson } from '../harness/ens-bundle.ts';

/**
 * `ens suppressions import|export`, run as a separate process against the database of a running
 * service: an import reads ENS's CSV and other providers' exports in batches of 1,000, reports each
 * bad row by its line and goes on (exit 1 at the end), and stops at a record the CSV parser cannot
 * read; an export is CSV that an import reads back as it was.
 */

const [svc, run] = await Promise.all([startTestService(t), bundleEns(t)]);
const client = await svc.createClient();
await svc.tenant(client, 'acme');
await svc.tenant(client, 'copy');
const dir = await mkdtemp(join(tmpdir(), 'ens-suppressions-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));

const scope = ['--client', client.clientId, '--tenant', 'acme'];

/** Runs `ens …`; with `json`, stdout must be one JSON document. */
const ens = ensJson(run, svc.env);

const rowsOf = async (tenant: string) =>
  (
    await svc.rt.db.query(
      `SELECT channel, address, scope, reason, source, detail, created_by FROM suppressions WHERE client_id = $1 AND tenant = $2 ORDER BY 1, 2, 3`,
      [client.clientId, tenant],
    )
  ).rows;

t.test(
  'import: batches of 1,000 with progress on stderr; bad rows reported by line and skipped, ' +
    'exit 1 when any; a broken CSV record stops it there',
  async (t) => {
    const lines = ['channel,address,reason,scope,detail'];
    for (let i = 0; i < 2500; i++)
      lines.push(`sms,+1555400${String(i).padStart(4, '0')},hard_bounce,*,import ${i}`);
    // Bad rows at known lines (the header is line 1).
    lines[10] = 'sms,not-a-phone,hard_bounce,*,x'; // line 11
    lines[20] = 'fax,+15554009999,manual,*,x'; // line 21
    lines[30] = 'sms,+15554009998,bored,*,x'; // line 31
    lines[40] = 'sms,+15554009997,manual,two words,x'; // line 41
    const file = join(dir, 'big.csv');
    await writeFile(file, `${lines.join('\r\n')}\r\n`);
    const r = await ens(['suppressions', 'import', file, ...scope]);
    t.equal(r.code, 1, 'exit 1: some rows were bad');
    t.match(r.stderr, /big\.csv:11: "not-a-phone" is not a sms address/);
    t.match(r.stderr, /big\.csv:21: "fax" is not a channel/);
    t.match(r.stderr, /big\.csv:31: "bored" is not a reason ENS knows/);
    t.match(r.stderr, /big\.csv:41: scope "two words" is not \* or an event type/);
    t.match(
      r.stderr,
      /ens: 4 rows of .*big\.csv not imported \(see the lines above\); every other row was\n$/,
    );
    t.same(r.json, { rows: 2500, created: 2496, updated: 0, kept: 0, bad_rows: 4 });
    const progress = r.stderr.split('\n').filter((l) => / rows read, /.test(l));
    t.ok(progress.length >= 3, `a progress line per batch of 1,000 (${progress.length})`);
    t.match(progress.at(-1), /2500 rows read, 2496 created, 0 updated, 4 bad$/);
    const count = async () =>
      Number(
        (
          await svc.rt.db.query(
            `SELECT count(*)::int AS n FROM suppressions WHERE client_id = $1 AND tenant = 'acme' AND source = 'import'`,
            [client.clientId],
          )
        ).rows[0].n,
      );
    t.equal(await count(), 2496, 'every good row is in');

    const again = await ens(['suppressions', 'import', file, ...scope]);
    t.match(
      again.json,
      { created: 0, updated: 2496 },
      'importing again is safe: every row updated',
    );

    // A broken quote on line 6: the parser cannot tell where the rows after it start, so the
    // import stops there, with the four rows before it written and nothing after.
    const broken = [
      'channel,address,reason,scope,detail',
      ...Array.from({ length: 4 }, (_, i) => `sms,+155550000${i + 1}0,manual,*,ok`),
      'sms,+15555000060,manual,*,"a "quoted" word',
      ...Array.from({ length: 4 }, (_, i) => `sms,+155550001${i + 1}0,manual,*,after`),
    ];
    await writeFile(join(dir, 'broken.csv'), `${broken.join('\n')}\n`);
    const stopped = await ens(['suppressions', 'import', join(dir, 'broken.csv'), ...scope]);
    t.equal(stopped.code, 1);
    t.match(stopped.stderr, /broken\.csv:6: not a CSV record \(.*\); the import stops here/);
    t.match(stopped.json, { rows: 4, created: 4, bad_rows: 0, stopped_at_line: 6 });
    const after = await svc.rt.db.query(
      `SELECT count(*)::int AS n FROM suppressions WHERE client_id = $1 AND detail = 'after'`,
      [client.clientId],
    );
    t.equal(after.rows[0].n, 0, 'nothing after the broken record was written');
  },
);

t.test(
  'import reads the exports of SendGrid, Postmark, Amazon SES and Mailgun, with a BOM, CRLF ' +
    'and quoted fields',
  async (t) => {
    const files: Record<string, string> = {
      'sendgrid-bounces.csv':
        '\ufeffemail,created,reason,status\r\nbounced1@example.com,1732300000,"550 5.1.1 The ' +
        'email account that you tried to reach does not exist, sorry",5.1.1\r\n',
      'postmark.csv':
        'EmailAddress,SuppressionReason,Origin,CreatedAt\nhard@example.com,HardBounce,Recipient,2026-11-01T10:00:00Z\nspam@example.com,SpamComplaint,Recipient,2026-11-01T10:00:00Z\nmanual@example.com,ManualSuppression,Customer,2026-11-01T10:00:00Z\n',
      'ses.csv':
        'EmailAddress,Reason,LastUpdateTime\nses-bounce@example.com,BOUNCE,2026-11-01T10:00:00Z\nses-complaint@example.com,COMPLAINT,2026-11-01T10:00:00Z\n',
      'mailgun-unsubscribes.csv':
        'address,tags,created_at\nmg@example.com,*,"Mon, 01 Nov 2026 10:00:00 UTC"\n',
      'ens.csv':
        'channel,address,reason,scope,detail\nwhatsapp,+15556001234,opt_out,*,"blocked us, ' +
        'then\nsaid why on a second line"\n',
    };
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);

    // Side by side: each file has addresses of its own.
    const [sendgrid, postmark, ses, own, mg] = await Promise.all([
      ens([
        'suppressions',
        'import',
        join(dir, 'sendgrid-bounces.csv'),
        ...scope,
        '--reason',
        'hard_bounce',
      ]),
      ens(['suppressions', 'import', join(dir, 'postmark.csv'), ...scope]),
      ens(['suppressions', 'import', join(dir, 'ses.csv'), ...scope]),
      ens(['suppressions', 'import', join(dir, 'ens.csv'), ...scope]),
      ens([
        'suppressions',
        'import',
        join(dir, 'mailgun-unsubscribes.csv'),
        ...scope,
        '--reason',
        'opt_out',
      ]),
    ]);
    for (const [name, r] of [
      ['sendgrid', sendgrid],
      ['postmark', postmark],
      ['ses', ses],
      ['ens', own],
      ['mailgun', mg],
    ] as const)
      t.equal(r.code, 0, `${name}: ${r.stderr}`);
    const unknownReason = await ens([
      'suppressions',
      'import',
      join(dir, 'sendgrid-bounces.csv'),
      ...scope,
    ]);
    t.equal(
      unknownReason.code,
      1,
      'without --reason, a reason text ENS does not know is a bad row',
    );
    t.match(unknownReason.stderr, /sendgrid-bounces\.csv:2: "550 5\.1\.1/);

    const got = Object.fromEntries((await rowsOf('acme')).map((r: any) => [r.address, r]));
    t.match(
      got['bounced1@example.com'],
      {
        channel: 'email',
        reason: 'hard_bounce',
        source: 'import',
        detail: '550 5.1.1 The email account that you tried to reach does not exist, sorry',
      },
      'SendGrid: its reason text kept as the evidence',
    );
    t.match(got['hard@example.com'], { reason: 'hard_bounce' });
    t.match(got['spam@example.com'], { reason: 'complaint' });
    t.match(got['manual@example.com'], { reason: 'manual' });
    t.match(got['ses-bounce@example.com'], { reason: 'hard_bounce' });
    t.match(got['ses-complaint@example.com'], { reason: 'complaint' });
    t.match(got['mg@example.com'], { reason: 'opt_out', channel: 'email' });
    t.match(got['+15556001234'], {
      channel: 'whatsapp',
      reason: 'opt_out',
      detail: 'blocked us, then\nsaid why on a second line',
    });

    await writeFile(join(dir, 'no-address.csv'), 'name,created\nAnn,2026-11-01\n');
    const noAddress = await ens(['suppressions', 'import', join(dir, 'no-address.csv'), ...scope]);
    t.equal(noAddress.code, 1);
    t.match(
      noAddress.stderr,
      /no-address\.csv:1: the header \(name,created\) has no address column/,
    );
    await writeFile(join(dir, 'empty.csv'), '');
    t.equal(
      (await ens(['suppressions', 'import', join(dir, 'empty.csv'), ...scope])).code,
      1,
      'an empty file',
    );
  },
);

t.test(
  'export writes CSV (stdout or --out) that import reads back into another tenant as it was',
  async (t) => {
    const stdout = await ens(['suppressions', 'export', ...scope, '--channel', 'email']);
    t.equal(stdout.code, 0, stdout.stderr);
    const records = parse(stdout.stdout, { columns: true }) as Record<string, string>[];
    t.same(Object.keys(records[0]!), [
      'channel',
      'address',
      'reason',
      'scope',
      'detail',
      'source',
      'provider',
      'delivery_id',
      'created_by',
      'created_at',
      'updated_at',
      'expires_at',
    ]);
    const emails = (await rowsOf('acme')).filter((r: any) => r.channel === 'email');
    t.same(
      records.map((r) => [r.address, r.reason, r.scope, r.detail]),
      emails.map((r: any) => [r.address, r.reason, r.scope, r.detail ?? '']),
      'every email entry, in key order',
    );

    const out = join(dir, 'export.csv');
    const toFile = await ens(['suppressions', 'export', ...scope, '--out', out]);
    t.equal(toFile.code, 0, toFile.stderr);
    const everything = await rowsOf('acme');
    t.same(toFile.json, { exported: everything.length, file: out });
    t.match(await readFile(out, 'utf8'), /^channel,address,reason,scope,detail,/);

    const back = await ens([
      'suppressions',
      'import',
      out,
      '--client',
      client.clientId,
      '--tenant',
      'copy',
    ]);
    t.equal(back.code, 0, back.stderr);
    t.equal(back.json.created, everything.length);
    const strip = (rows: any[]) =>
      rows.map(({ channel, address, scope, reason, detail }) => ({
        channel,
        address,
        scope,
        reason,
        detail,
      }));
    t.same(
      strip(await rowsOf('copy')),
      strip(everything),
      'the copy has every entry with its reason, scope and detail',
    );
  },
);
