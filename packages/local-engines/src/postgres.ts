import path, { resolve } from 'node:path';
import { spawnEngine } from './engine-process.ts';
import { findPostgresBinaries } from './postgres-binaries.ts';
import { initDataDir, isDataDir, SUPERUSER } from './postgres-initdb.ts';
import { convertToPassword, readPassword } from './postgres-password.ts';
import { ensureDatabase, waitForPostgres } from './postgres-ready.ts';
import { clearStalePostmaster } from './postgres-stale.ts';
import { chownTree, firstClosedDir, postgresRunAs, type RunAs } from './service-user.ts';
import { EngineUnreachableError } from './engine-errors.ts';
import { startFailure, superviseEngine, type SupervisedEngine } from './supervised-engine.ts';

export interface StartPostgresOptions {
  dataDir: string;
  /** Defaults to a free port, chosen once and kept across start() calls. */
  port?: number;
  onLog?: (line: string) => void;
  /**
   * Default true. false skips fsync in initdb and the server: much faster, and it
   * still survives the server being killed, but not the machine crashing. For
   * throwaway test clusters only.
   */
  fsync?: boolean;
  /** Extra server settings, passed as `-c name=value`. */
  settings?: Readonly<Record<string, string | number | boolean>>;
  /** Directories to search instead of PATH and /usr/lib/postgresql/<version>/bin. */
  binDirs?: readonly string[];
  /** How long a start (including crash recovery) may take. Default 60 s. */
  startTimeoutMs?: number;
}

export interface PostgresHandle extends SupervisedEngine {
  /** postgres://ens:PASSWORD@127.0.0.1:PORT/ens (the password is in DATA_DIR/ens.password) */
  readonly url: string;
  readonly dataDir: string;
}

export const POSTGRES_DATABASE = 'ens';
// sun_path is 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH = 107;

function settingArgs(settings: Readonly<Record<string, string | number | boolean>>): string[] {
  return Object.entries(settings).flatMap(([name, value]) => [
    '-c',
    `${name}=${typeof value === 'boolean' ? (value ? 'on' : 'off') : value}`,
  ]);
}

function serverArgs(dataDir: string, port: number, opts: StartPostgresOptions): string[] {
  // The socket lives in the data directory so it never collides with a system
  // server's /var/run/postgresql; a path too long for a socket just disables it.
  // TCP only on 127.0.0.1: ENS is the only client, and it runs on this machine.
  const socketDir =
    Buffer.byteLength(`${dataDir}/.s.PGSQL.${port}`) <= MAX_SOCKET_PATH ? dataDir : '';
  const settings: Record<string, string | number | boolean> = { max_connections: 200 };
  if (opts.fsync === false) {
    // synchronous_commit stays on: without it a commit is acknowledged before its
    // WAL leaves shared memory, so kill9() would lose acknowledged writes and fault
    // tests would flake. With fsync off it only costs a write() per commit.
    Object.assign(settings, { fsync: false, full_page_writes: false });
  }
  Object.assign(settings, opts.settings);
  return [
    '-D',
    dataDir,
    '-p',
    String(port),
    '-k',
    socketDir,
    '-h',
    '127.0.0.1',
    ...settingArgs(settings),
  ];
}

export async function startPostgres(opts: StartPostgresOptions): Promise<PostgresHandle> {
  const bins = await findPostgresBinaries(opts.binDirs);
  const runAs = await postgresRunAs();
  const dataDir = resolve(opts.dataDir);
  const log = opts.onLog ?? (() => {});
  const timeoutMs = opts.startTimeoutMs ?? 60_000;

  if (runAs) await refuseUnreachable(runAs, bins.binDir, dataDir);
  let password: string;
  if (!(await isDataDir(dataDir))) {
    password = await initDataDir({
      initdb: bins.initdb,
      dataDir,
      fsync: opts.fsync ?? true,
      onLog: log,
      ...(runAs ? { runAs } : {}),
    });
  } else {
    if (runAs) await chownTree(dataDir, runAs);
    const stored = await readPassword(dataDir);
    if (stored !== undefined) password = stored;
    else {
      // A cluster from before ENS used passwords (it trusted every local user): converted once.
      await clearStalePostmaster(dataDir, log);
      password = await convertToPassword({
        postgres: bins.postgres,
        dataDir,
        user: SUPERUSER,
        ...(runAs ? { runAs } : {}),
      });
      log(`converted ${dataDir} to password authentication (SCRAM-SHA-256)`);
    }
  }

  const engine = await superviseEngine({
    engine: 'postgres',
    ...(opts.port !== undefined ? { port: opts.port } : {}),
    stopSignal: 'SIGINT', // fast shutdown: aborts open transactions instead of waiting for clients
    portTaken: /could not bind|already in use/i,
    async launch(port) {
      await clearStalePostmaster(dataDir, log);
      const server = await spawnEngine({
        command: bins.postgres,
        args: serverArgs(dataDir, port, opts),
        cwd: dataDir,
        parentDeathSignal: 'SIGINT',
        onLog: log,
        ...(runAs ? { runAs } : {}),
      });
      let client: Awaited<ReturnType<typeof waitForPostgres>>;
      try {
        client = await waitForPostgres({
          port,
          user: SUPERUSER,
          password,
          database: 'postgres',
          timeoutMs,
          abortIf: () => (server.isRunning() ? undefined : new Error('exited')),
        });
      } catch {
        throw await startFailure(
          'postgres',
          `PostgreSQL on port ${port}`,
          server,
          'SIGINT',
          timeoutMs,
        );
      }
      try {
        await ensureDatabase(client, POSTGRES_DATABASE);
      } catch (err) {
        // The handle only learns about servers that started fully, so nothing else would stop this
        // one.
        await server.terminate('SIGINT', 10_000);
        throw err;
      } finally {
        await client.end().catch(() => {});
      }
      return server;
    },
  });

  return {
    url: `postgres://${SUPERUSER}:${password}@127.0.0.1:${engine.port}/${POSTGRES_DATABASE}`,
    port: engine.port,
    get pid() {
      return engine.pid;
    },
    dataDir,
    start: engine.start,
    stop: engine.stop,
    kill9: engine.kill9,
  };
}

/**
 * Run as root, PostgreSQL runs as another user, who must be able to enter the directories of its
 * programs and of its data. A root shell's home and `mktemp -d` are mode 700, so a clone there
 * failed deep inside initdb ("Permission denied"); this says at once what is in the way and the
 * fix.
 */
async function refuseUnreachable(runAs: RunAs, binDir: string, dataDir: string): Promise<void> {
  const why = `PostgreSQL refuses to run as root, so ENS runs it as the "${runAs.name}" user`;
  const bins = await firstClosedDir(binDir, runAs);
  if (bins) {
    throw new EngineUnreachableError(
      'postgres',
      `${why}, who cannot enter ${bins.dir} (mode ${bins.mode.toString(8)}) to run the PostgreSQL programs in ${binDir}. ` +
        ("Install the machine's PostgreSQL (apt-get install -y postgresql), which ENS prefers, " +
          'or keep ENS in a directory that user can reach (not under /root or a mode-700 ' +
          'directory), or set DATABASE_URL'),
    );
  }
  const data = await firstClosedDir(path.dirname(dataDir), runAs);
  if (data) {
    throw new EngineUnreachableError(
      'postgres',
      `${why}, who cannot enter ${data.dir} (mode ${data.mode.toString(8)}) on the way to its data in ${dataDir}. ` +
        `Set ENS_DATA_DIR to a directory it can reach (for example ENS_DATA_DIR=/var/lib/ens), or open the way: chmod o+x ${data.dir}`,
    );
  }
}
