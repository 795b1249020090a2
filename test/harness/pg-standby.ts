import { execFile } from 'node:child_process';
import { chmod, mkdtemp, realpath, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { findPostgresBinaries, startPostgres, type PostgresHandle } from '@ens/local-engines';
import { scratchRoot } from './scratch-root.ts';
import type { Teardown } from './service.ts';

const execFileAsync = promisify(execFile);

/*
 * A streaming standby of a test PostgreSQL, as a platform team's pair is (Patroni, CloudNativePG,
 * pg_auto_failover): made with pg_basebackup from the running primary, started on its own port on
 * loopback, and promoted with pg_ctl promote. With `synchronous`, the primary waits for the standby
 * to have each commit before acknowledging it (synchronous_standby_names, synchronous_commit on).
 */

export interface Standby {
  handle: PostgresHandle;
  /**
   * Stops (SIGSTOP) the primary's WAL sender to this standby, as a slow link between them would:
   * commits go on being acknowledged by an asynchronous primary and wait on a synchronous one.
   * Resolves with the sender's pid, for killing it with the primary.
   */
  holdReplication(): Promise<number>;
  /** Promotes the standby (pg_ctl promote, waiting until it takes writes). */
  promote(): Promise<void>;
  /** Stops it and removes its data; safe to call more than once. */
  stop(): Promise<void>;
}

const passwordOf = (url: string) => decodeURIComponent(new URL(url).password);

/** A client of `url` (one host), connected, that a dying server cannot crash the process with. */
async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  c.on('error', () => {});
  await c.connect();
  return c;
}

async function query<R extends pg.QueryResultRow>(url: string, sql: string): Promise<R[]> {
  const c = await connect(url);
  try {
    return (await c.query<R>(sql)).rows;
  } finally {
    await c.end().catch(() => {});
  }
}

/** Polls `fn` every 50 ms until it returns true, for at most `ms`. */
async function until(fn: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Makes and starts a streaming standby of `primary`, and waits until it streams (and, with
 * `synchronous`, until the primary counts it as its synchronous standby). Stopped with the test.
 */
export async function startStandby(
  t: Teardown,
  primary: PostgresHandle,
  opts: {
    synchronous: boolean;
    /**
     * Where a lost server was, to rebuild it there as the new primary's standby (the port its
     * clients' multi-host URL names): its data directory is replaced. A new one when unset.
     */
    in?: { port: number; dataDir: string };
  },
): Promise<Standby> {
  // The server's own directory: PATH may link initdb and postgres only (not pg_basebackup).
  const binDir = dirname(await realpath((await findPostgresBinaries()).postgres));
  const dir = opts.in ? undefined : await mkdtemp(join(await scratchRoot(), 'ens-standby-'));
  const dataDir = opts.in?.dataDir ?? join(dir!, 'data');
  let handle: PostgresHandle | undefined;
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      await handle?.stop().catch(() => {});
      await rm(dir ?? dataDir, { recursive: true, force: true });
    })();
    return stopping;
  };
  // Registered first: a copy or a start that fails leaves nothing behind either.
  t.teardown(stop);
  // PostgreSQL runs as the postgres user when we are root; it must reach its data dir.
  if (dir) await chmod(dir, 0o755);
  else await rm(dataDir, { recursive: true, force: true });
  const password = passwordOf(primary.url);
  await execFileAsync(
    join(binDir, 'pg_basebackup'),
    [
      '-D',
      dataDir,
      '-d',
      `host=127.0.0.1 port=${primary.port} user=ens application_name=ens_standby`,
      // -R: standby.signal and primary_conninfo (the password included) for the copy.
      '-R',
      '-X',
      'stream',
      '-c',
      'fast',
      '--no-sync',
    ],
    { env: { ...process.env, PGPASSWORD: password } },
  );
  const started = await startPostgres({
    dataDir,
    fsync: false,
    ...(opts.in ? { port: opts.in.port } : {}),
  });
  handle = started;

  // Set after the copy was taken: the standby, once promoted, waits for no standby of its own.
  await query(
    primary.url,
    `ALTER SYSTEM SET synchronous_standby_names = '${opts.synchronous ? 'ens_standby' : ''}'`,
  );
  await query(primary.url, 'SELECT pg_reload_conf()');
  const state = opts.synchronous ? 'sync' : 'async';
  await until(
    async () =>
      (
        await query<{ n: number }>(
          primary.url,
          `SELECT count(*)::int AS n FROM pg_stat_replication
            WHERE application_name = 'ens_standby' AND state = 'streaming'
              AND sync_state = '${state}'`,
        )
      )[0]!.n === 1,
    30_000,
    `the standby streaming (${state})`,
  );

  return {
    handle: started,
    stop,
    async holdReplication() {
      const [row] = await query<{ pid: number }>(
        primary.url,
        `SELECT pid FROM pg_stat_replication WHERE application_name = 'ens_standby'`,
      );
      process.kill(row!.pid, 'SIGSTOP');
      return row!.pid;
    },
    async promote() {
      // pg_ctl refuses to run as root: it runs as the data directory's owner (the postgres user).
      const owner = await stat(dataDir);
      await execFileAsync(join(binDir, 'pg_ctl'), ['promote', '-w', '-D', dataDir], {
        ...(process.getuid?.() === 0 ? { uid: owner.uid, gid: owner.gid } : {}),
      });
    },
  };
}

/**
 * libpq's multi-host URL over these loopback ports, in this order, with the credentials of `like`.
 */
export function multiHostUrl(
  like: string,
  ports: readonly number[],
  targetSessionAttrs?: string,
): string {
  const u = new URL(like);
  const hosts = ports.map((p) => `127.0.0.1:${p}`).join(',');
  const query = targetSessionAttrs ? `?target_session_attrs=${targetSessionAttrs}` : '';
  return `postgres://${u.username}:${u.password}@${hosts}${u.pathname}${query}`;
}

/**
 * The loss of a server's machine: the postmaster and every backend killed with -9 at once, so that
 * no backend left running commits after it (a postmaster killed alone leaves its backends to
 * finish). Resolves once the handle knows it is down.
 */
export async function killMachine(server: PostgresHandle): Promise<void> {
  const postmaster = server.pid;
  if (postmaster !== undefined) {
    let backends: number[] = [];
    try {
      backends = (await execFileAsync('pgrep', ['-P', String(postmaster)])).stdout
        .split('\n')
        .filter(Boolean)
        .map(Number);
    } catch {
      // no children (pgrep exits 1)
    }
    for (const pid of [postmaster, ...backends]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  await server.kill9();
}

/** Whether the server at `url` is a standby. */
export async function inRecovery(url: string): Promise<boolean> {
  return (await query<{ r: boolean }>(url, 'SELECT pg_is_in_recovery() AS r'))[0]!.r;
}
