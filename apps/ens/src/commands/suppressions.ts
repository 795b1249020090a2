import { createReadStream, createWriteStream } from 'node:fs';
import { access } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { parse } from 'csv-parse';
import { stringify } from 'csv-stringify';
import {
  CHANNELS,
  addressWording,
  normaliseAddress,
  SUPPRESSION_REASONS,
  SuppressionStore,
  TenantStore,
  type Channel,
  type Config,
  type Suppression,
  type SuppressionInput,
  type SuppressionQuery,
  type SuppressionReasonT,
} from '@ens/core';
import { AuditLog } from '@ens/service-ops/staff';
import { withAdminSession, type AdminSession } from './admin-session.ts';
import { readHeader, readRow, type Header } from './suppression-csv.ts';
import { print, UsageError } from '../output.ts';

/*
 * `ens suppressions list|add|remove|import|export --client ID --tenant T …`: a tenant's suppression
 * list from the operator's side, written with source `cli` (add) or `import`, created_by `cli`.
 * Exit codes: 0 done; 1 for anything wrong with what was asked (unknown client or tenant, an
 * address that is not the channel's, nothing to remove, a bad option value, bad rows in an import);
 * 2 for a command line node cannot parse (an unknown option). Arguments are checked before the
 * database is opened.
 */

export interface SuppressionsArgs {
  sub: string | undefined;
  /** import's FILE. */
  file?: string;
  client?: string;
  tenant?: string;
  channel?: string;
  address?: string;
  reason?: string;
  scope?: string;
  detail?: string;
  expiresAt?: string;
  out?: string;
}

/** Rows per upsert statement of an import (one statement, one round trip each). */
export const IMPORT_BATCH = 1000;
/** Bad rows of an import reported one by one; past this, only counted. */
const REPORTED_BAD_ROWS = 100;

const EXPORT_COLUMNS = [
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
] as const;

const USAGE =
  'usage: ens suppressions list|add|remove|import FILE.csv|export --client ID --tenant T ' +
  '[...]; see ens --help';

/** A mistake in what was asked: one line on stderr, exit code 1. */
const bad = (message: string): UsageError => new UsageError(message, 1);

function need(v: string | undefined, name: string): string {
  if (v === undefined || v === '') throw bad(`${name} is required; see ens --help`);
  return v;
}

function channelOf(v: string | undefined): Channel | undefined {
  if (v === undefined) return undefined;
  if (!(CHANNELS as readonly string[]).includes(v))
    throw bad(`--channel must be one of ${CHANNELS.join(', ')}; got "${v}"`);
  return v as Channel;
}

function reasonOf(v: string | undefined): SuppressionReasonT | undefined {
  if (v === undefined) return undefined;
  if (!(SUPPRESSION_REASONS as readonly string[]).includes(v))
    throw bad(`--reason must be one of ${SUPPRESSION_REASONS.join(', ')}; got "${v}"`);
  return v as SuppressionReasonT;
}

function scopeOf(v: string | undefined): string | undefined {
  if (v !== undefined && !/^[^\s]{1,200}$/.test(v))
    throw bad(`--scope must be * or an event type (no spaces, at most 200 characters); got "${v}"`);
  return v;
}

function addressOf(channel: Channel, v: string): string {
  const key = normaliseAddress(channel, v);
  if (key === null) throw bad(`"${v}" is not ${addressWording(channel)}`);
  return key;
}

interface Scope {
  store: SuppressionStore;
  clientId: string;
  tenant: string;
}

/** The store, after checking the client and its tenant exist (exit 1 otherwise). */
async function open(
  config: Config,
  s: AdminSession,
  clientId: string,
  tenant: string,
): Promise<Scope> {
  if (!(await s.clients.get(clientId))) throw bad(`no client with id ${clientId}`);
  if (!(await new TenantStore(s.db).get(clientId, tenant)))
    throw bad(`client ${clientId} has no tenant "${tenant}"`);
  return {
    store: new SuppressionStore(s.db, { softBounceHoldMs: config.consent.softBounceHoldMs }),
    clientId,
    tenant,
  };
}

/** Every entry matching the filters, page by page along the primary key. */
async function* walk(
  sc: Scope,
  q: Omit<SuppressionQuery, 'cursor' | 'limit'>,
): AsyncGenerator<Suppression> {
  let cursor: string | undefined;
  do {
    const page = await sc.store.list(sc.clientId, sc.tenant, {
      ...q,
      limit: 1000,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    yield* page.results;
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined);
}

function audit(
  s: AdminSession,
  action: string,
  sc: Scope,
  detail: Record<string, unknown>,
): Promise<void> {
  return new AuditLog(s.db).write({
    actor: 'cli',
    action,
    target: `${sc.clientId}/${sc.tenant}`,
    detail,
  });
}

export async function suppressionsCommand(config: Config, a: SuppressionsArgs): Promise<void> {
  await withAdminSession(config, plan(config, a));
}

function plan(config: Config, a: SuppressionsArgs): (s: AdminSession) => Promise<void> {
  if (!['list', 'add', 'remove', 'import', 'export'].includes(a.sub ?? '')) throw bad(USAGE);
  const clientId = need(a.client, '--client');
  const tenant = need(a.tenant, '--tenant');
  const channel = channelOf(a.channel);
  const reason = reasonOf(a.reason);
  const scope = scopeOf(a.scope);
  switch (a.sub) {
    case 'list': {
      const address = a.address;
      if (address !== undefined)
        addressOf(need(channel, '--channel (with --address)') as Channel, address);
      return async (s) => {
        const sc = await open(config, s, clientId, tenant);
        // One JSON array, written entry by entry: a list of millions is never held in memory.
        let n = 0;
        process.stdout.write('[');
        for await (const e of walk(sc, { channel, reason, address }))
          process.stdout.write(`${n++ === 0 ? '\n' : ',\n'}  ${JSON.stringify(e)}`);
        process.stdout.write(n === 0 ? ']\n' : '\n]\n');
      };
    }
    case 'add': {
      const ch = need(channel, '--channel') as Channel;
      const address = addressOf(ch, need(a.address, '--address'));
      if (a.expiresAt !== undefined && !(Date.parse(a.expiresAt) > Date.now()))
        throw bad(`--expires-at must be a date-time in the future; got "${a.expiresAt}"`);
      if (a.detail !== undefined && a.detail.length > 1000)
        throw bad('--detail is longer than 1000 characters');
      return async (s) => {
        const sc = await open(config, s, clientId, tenant);
        const input: SuppressionInput = {
          tenant,
          channel: ch,
          address,
          scope: scope ?? '*',
          reason: reason ?? 'manual',
          source: 'cli',
          createdBy: 'cli',
          detail: a.detail ?? null,
          expiresAt: a.expiresAt === undefined ? null : new Date(a.expiresAt).toISOString(),
        };
        const { entries, created } = await sc.store.upsert(clientId, [input]);
        const entry = entries[0];
        if (!entry)
          throw bad(
            `${address} has a standing entry of scope "${input.scope}" that a soft_bounce does not replace; remove it first`,
          );
        await audit(s, 'suppression.add', sc, {
          channel: ch,
          address,
          scope: entry.scope,
          reason: entry.reason,
          created: created > 0,
        });
        print({ ...entry, created: created > 0 });
      };
    }
    case 'remove': {
      const ch = need(channel, '--channel') as Channel;
      const address = addressOf(ch, need(a.address, '--address'));
      return async (s) => {
        const sc = await open(config, s, clientId, tenant);
        const removed = await sc.store.remove(clientId, tenant, ch, address, scope);
        if (removed.length === 0)
          throw bad(
            `${address} (${ch}) has no entry${scope === undefined ? '' : ` of scope "${scope}"`} in tenant "${tenant}"`,
          );
        await audit(s, 'suppression.remove', sc, {
          channel: ch,
          address,
          scopes: removed.map((e) => e.scope),
        });
        print({ removed: removed.length, entries: removed });
      };
    }
    case 'import': {
      const file = need(a.file, 'FILE');
      return async (s) => {
        await access(file).catch(() => {
          throw bad(`cannot read ${file}`);
        });
        const sc = await open(config, s, clientId, tenant);
        const r = await importFile(sc, file, { channel, reason, tenant });
        await audit(s, 'suppression.import', sc, { file, ...r });
        print(r);
        if (r.stopped_at_line !== undefined)
          throw bad(
            `${file}:${r.stopped_at_line}: the import stopped at a record the CSV parser cannot read; the ${r.created + r.updated} entries before it are written`,
          );
        if (r.bad_rows > 0)
          throw bad(
            `${r.bad_rows} row${r.bad_rows === 1 ? '' : 's'} of ${file} not imported (see the lines above); every other row was`,
          );
      };
    }
    case 'export': {
      return async (s) => {
        const sc = await open(config, s, clientId, tenant);
        let n = 0;
        const rows = async function* () {
          for await (const e of walk(sc, { channel, reason })) {
            n++;
            yield e;
          }
        };
        await pipeline(
          rows,
          stringify({ header: true, columns: [...EXPORT_COLUMNS] }),
          a.out === undefined ? process.stdout : createWriteStream(a.out),
        );
        if (a.out !== undefined) print({ exported: n, file: a.out });
      };
    }
  }
  throw bad(USAGE);
}

export interface ImportResult {
  /** Data rows read (the header aside). */
  rows: number;
  /** Entries written: created new, or replacing one with the same key. */
  created: number;
  updated: number;
  /** Soft bounces over a standing entry of another reason: left as they were. */
  kept: number;
  bad_rows: number;
  /** Where a record the CSV parser could not read stopped the import (absent: read to the end). */
  stopped_at_line?: number;
}

/**
 * Reads the file row by row and upserts it in batches of IMPORT_BATCH, so a file of millions takes
 * constant memory. A bad row (no address, an address that is not the channel's, an unknown reason
 * or channel, a bad scope or expiry) is reported on stderr with its line number and skipped; the
 * import goes on, and the command exits 1 at the end when any row was bad. Going on is the useful
 * choice for a list moved from another provider, where a few junk rows are common: every good row
 * is in after one run, and re-running the fixed file is safe (an upsert). A record the CSV parser
 * cannot read (a broken quote) stops the import at its line instead: past it, the parser cannot
 * tell where rows start, and guessing would write wrong entries or drop good ones unreported.
 */
async function importFile(
  sc: Scope,
  file: string,
  defaults: { channel?: Channel; reason?: SuppressionReasonT; tenant: string },
): Promise<ImportResult> {
  const out: ImportResult = { rows: 0, created: 0, updated: 0, kept: 0, bad_rows: 0 };
  const tty = process.stderr.isTTY === true;
  let reported = -1;
  const progress = (done = false) => {
    if (!tty && out.rows === reported) return;
    reported = out.rows;
    const line = `ens: ${file}: ${out.rows} rows read, ${out.created} created, ${out.updated} updated, ${out.bad_rows} bad`;
    process.stderr.write(tty ? `\r${line}${done ? '\n' : ''}` : `${line}\n`);
  };
  const badRow = (line: number, why: string) => {
    out.bad_rows++;
    if (out.bad_rows <= REPORTED_BAD_ROWS)
      process.stderr.write(`${tty ? '\n' : ''}ens: ${file}:${line}: ${why}\n`);
    else if (out.bad_rows === REPORTED_BAD_ROWS + 1)
      process.stderr.write(`ens: ${file}: more bad rows; only counted from here on\n`);
  };
  let batch: SuppressionInput[] = [];
  const flush = async () => {
    if (batch.length === 0) return;
    const { entries, created } = await sc.store.upsert(sc.clientId, batch);
    // Duplicates within a batch are one entry (the last wins), as if written in turn.
    const distinct = new Set(
      batch.map((b) =>
        JSON.stringify([b.channel, normaliseAddress(b.channel, b.address), b.scope]),
      ),
    ).size;
    out.created += created;
    out.updated += entries.length - created;
    out.kept += distinct - entries.length;
    batch = [];
    progress();
  };

  // A record the parser cannot read stops the import at its line: past it the parser cannot say
  // where rows start (an open quote runs on over the rows below). The parser reports it as a
  // 'skip', in order with the records, and goes on; every record from that line on is ignored,
  // and every one before it (some may still wait in the stream's buffer) is written.
  const parser = parse({
    bom: true,
    relax_column_count: true,
    skip_empty_lines: true,
    skip_records_with_error: true,
    info: true,
  });
  parser.on('skip', (err: Error & { lines?: number }) => {
    if (out.stopped_at_line !== undefined) return;
    out.stopped_at_line = err.lines ?? 0;
    process.stderr.write(
      `${tty ? '\n' : ''}ens: ${file}:${out.stopped_at_line}: not a CSV record (${err.message}); the import stops here\n`,
    );
  });
  const input = createReadStream(file);
  input.on('error', (e) => parser.destroy(e));
  input.pipe(parser);
  let header: Header | null = null;
  for await (const { record, info } of parser as AsyncIterable<{
    record: string[];
    info: { lines: number };
  }>) {
    if (out.stopped_at_line !== undefined && info.lines >= out.stopped_at_line) {
      input.destroy();
      break;
    }
    if (header === null) {
      const h = readHeader(record);
      if ('error' in h) throw bad(`${file}:${info.lines}: ${h.error}`);
      header = h;
      continue;
    }
    out.rows++;
    const row = readRow(header, record, defaults);
    if ('error' in row) {
      badRow(info.lines, row.error);
      continue;
    }
    batch.push(row);
    if (batch.length >= IMPORT_BATCH) await flush();
  }
  if (header === null)
    throw bad(
      `${file}${out.stopped_at_line === undefined ? ' is empty' : `:${out.stopped_at_line}: its header is not a CSV record`}: it needs a header line (channel,address,reason,scope,detail)`,
    );
  await flush();
  progress(true);
  return out;
}
