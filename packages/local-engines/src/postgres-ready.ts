import pg from 'pg';
import { pollUntil } from './poll-until.ts';

export interface WaitForPostgresOptions {
  port: number;
  user: string;
  password: string;
  database: string;
  timeoutMs: number;
  abortIf: () => Error | undefined;
}

async function tryConnect(opts: WaitForPostgresOptions): Promise<pg.Client | undefined> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port: opts.port,
    user: opts.user,
    password: opts.password,
    database: opts.database,
    connectionTimeoutMillis: 2_000,
  });
  // A connection refused mid-startup is expected; without a listener it would crash the process.
  client.on('error', () => {});
  try {
    await client.connect();
    // Accepting a TCP connection is not enough during recovery; a query proves the server is
    // usable.
    await client.query('select 1');
    return client;
  } catch {
    await client.end().catch(() => {});
    return undefined;
  }
}

/** Resolves with a connected client once the server answers queries. */
export function waitForPostgres(opts: WaitForPostgresOptions): Promise<pg.Client> {
  return pollUntil(() => tryConnect(opts), {
    intervalMs: 25,
    timeoutMs: opts.timeoutMs,
    abortIf: opts.abortIf,
  });
}

/** The server creates no application database by itself; `npm start` expects one to exist. */
export async function ensureDatabase(client: pg.Client, name: string): Promise<void> {
  const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
  if (rowCount) return;
  try {
    await client.query(`create database ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    // duplicate_database: created concurrently, which is what we wanted.
    if ((err as { code?: string }).code !== '42P04') throw err;
  }
}
