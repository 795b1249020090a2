import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { access, readFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@ens/local-engines';
import { checkAborted, onCleanup } from './cleanup.ts';
import { progress, sleep } from './log.ts';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const ENS_BIN = path.join(ROOT, 'bin/ens.mjs');

/** Environment shared by every ENS child and `ens clients create`. */
export function ensEnv(o: {
  databaseUrl: string;
  natsUrl: string;
  dataDir: string;
  port?: number;
}): Record<string, string> {
  return {
    DATABASE_URL: o.databaseUrl,
    NATS_URL: o.natsUrl,
    ENS_DATA_DIR: o.dataDir,
    HOST: '127.0.0.1',
    ...(o.port !== undefined ? { PORT: String(o.port) } : {}),
    ENS_LOG_LEVEL: 'warn',
    // One process unless a phase measures more (the scaling line sets ENS_PROCESSES itself).
    ENS_PROCESSES: '1',
    ENS_RATE_LIMIT: '1000000',
    ENS_TOKEN_RATE_LIMIT: '1000000',
    ENS_ALLOW_PRIVATE_CALLBACKS: 'true',
  };
}

/** What the child logged at warn or above, kept short for the report. */
export interface LogSummary {
  warnings: number;
  errors: number;
  /** Distinct messages (msg field or raw line), with how often each appeared. */
  samples: Map<string, number>;
}

export interface EnsChild {
  name: string;
  pid: number;
  /** Set when started with snapshotDir. */
  snapshotDir?: string;
  baseUrl: string;
  logs: LogSummary;
  /** Resident set size in KiB from /proc/<pid>/status. */
  rssKb(): Promise<number>;
  /** SIGINT (graceful: roles drain, a CPU profile is written), then SIGKILL after 15 s. */
  stop(): Promise<void>;
  exited: Promise<number | null>;
}

/** Every ENS child started in this run, for the log summary at the end. */
export const allChildren: EnsChild[] = [];

let setpriv: Promise<string | null> | undefined;
/** setpriv --pdeathsig makes the kernel stop the child if this process dies, even by SIGKILL. */
function findSetpriv(): Promise<string | null> {
  setpriv ??= (async () => {
    for (const p of ['/usr/bin/setpriv', '/bin/setpriv']) {
      const ok = await access(p, constants.X_OK).then(
        () => true,
        () => false,
      );
      if (!ok) continue;
      const works = await new Promise<boolean>((r) =>
        execFile(p, ['--pdeathsig', 'TERM', '--', 'true'], (e) => r(!e)),
      );
      if (works) return p;
    }
    return null;
  })();
  return setpriv;
}

/** Spawns `node [extraNodeArgs] bin/ens.mjs <args>` so that it dies with us. */
export async function spawnNode(
  nodeArgs: string[],
  env: Record<string, string>,
  stdio: 'pipe' | 'ipc' = 'pipe',
): Promise<ChildProcess> {
  const sp = await findSetpriv();
  const [command, args] = sp
    ? [sp, ['--pdeathsig', 'TERM', '--', process.execPath, ...nodeArgs]]
    : [process.execPath, nodeArgs];
  return spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, NODE_OPTIONS: '', ...env },
    stdio: stdio === 'ipc' ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'],
  });
}

function collectLogs(child: ChildProcess, logs: LogSummary, tail: string[]): void {
  const onLine = (line: string) => {
    if (!line.trim()) return;
    tail.push(line);
    if (tail.length > 40) tail.shift();
    let level = 50;
    let msg = line;
    try {
      const o = JSON.parse(line) as { level?: number; msg?: string; err?: { message?: string } };
      level = o.level ?? 50;
      msg = `${o.msg ?? ''}${o.err?.message ? `: ${o.err.message}` : ''}`;
    } catch {
      // not pino: count as an error line (stack traces, node warnings)
    }
    if (level >= 50) logs.errors++;
    else if (level >= 40) logs.warnings++;
    else return;
    const key = msg.slice(0, 160);
    if (logs.samples.has(key) || logs.samples.size < 20)
      logs.samples.set(key, (logs.samples.get(key) ?? 0) + 1);
  };
  for (const stream of [child.stdout, child.stderr]) {
    let buf = '';
    stream?.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
  }
}

export interface StartEnsOptions {
  name: string;
  env: Record<string, string>;
  roles?: string[];
  /** Directory for --cpu-prof output; profiling off when undefined. */
  profDir?: string;
  /** More node flags for the child (investigations: --inspect, ...). */
  nodeArgs?: string[];
  /** The child writes a heap snapshot into this directory on SIGUSR2. */
  snapshotDir?: string;
}

/**
 * Starts `ens serve` as a child process and, when it runs the api role, waits for /readyz = 200.
 */
export async function startEns(o: StartEnsOptions): Promise<EnsChild> {
  checkAborted();
  const port = await freePort();
  const nodeArgs = [
    ...(o.profDir
      ? ['--cpu-prof', `--cpu-prof-dir=${o.profDir}`, `--cpu-prof-name=${o.name}.cpuprofile`]
      : []),
    ...(o.snapshotDir
      ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${o.snapshotDir}`]
      : []),
    ...(o.nodeArgs ?? []),
    ENS_BIN,
    'serve',
    ...(o.roles ? ['--roles', o.roles.join(',')] : []),
  ];
  const child = await spawnNode(nodeArgs, { ...o.env, PORT: String(port) });
  const logs: LogSummary = { warnings: 0, errors: 0, samples: new Map() };
  const tail: string[] = [];
  collectLogs(child, logs, tail);
  const exited = new Promise<number | null>((r) =>
    child.on('exit', (code, signal) => r(code ?? (signal ? -1 : null))),
  );
  let hasExited = false;
  void exited.then(() => (hasExited = true));
  const pid = child.pid!;
  const stop = async () => {
    if (hasExited) return;
    child.kill('SIGINT');
    const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(t);
  };
  const unregister = onCleanup(`ens child ${o.name}`, stop);
  const baseUrl = `http://127.0.0.1:${port}`;
  const handle: EnsChild = {
    name: o.name,
    pid,
    ...(o.snapshotDir ? { snapshotDir: o.snapshotDir } : {}),
    baseUrl,
    logs,
    exited,
    async rssKb() {
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
      if (!m) throw new Error(`no VmRSS for pid ${pid}`);
      return Number(m[1]);
    },
    stop: () => unregister(),
  };

  allChildren.push(handle);
  const roles = o.roles ?? ['api', 'worker', 'callbacks', 'feed'];
  const deadline = Date.now() + 60_000;
  if (roles.includes('api')) {
    for (;;) {
      if (hasExited)
        throw new Error(`ENS child ${o.name} exited during start-up:\n${tail.join('\n')}`);
      const ok = await fetch(`${baseUrl}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      if (Date.now() > deadline)
        throw new Error(`ENS child ${o.name} not ready after 60 s:\n${tail.join('\n')}`);
      await sleep(100);
    }
  } else {
    // No HTTP server to ask: give it a moment and make sure it did not die on start-up.
    await sleep(500);
    if (hasExited)
      throw new Error(`ENS child ${o.name} exited during start-up:\n${tail.join('\n')}`);
  }
  progress(
    `ENS child "${o.name}" (pid ${pid}, roles ${roles.join(',')}) ${roles.includes('api') ? `ready at ${baseUrl}` : 'started'}`,
  );
  return handle;
}

export interface BenchClient {
  clientId: string;
  clientSecret: string;
  callbackSecret: string;
}

/** `ens clients create --name bench --callback-secret`, which prints one JSON object. */
export async function createClient(
  env: Record<string, string>,
  name = 'bench',
  /** Node flags before bin/ens.mjs: the sources instead of the build, for instance. */
  nodeArgs: string[] = [],
): Promise<BenchClient> {
  const child = await spawnNode(
    [...nodeArgs, ENS_BIN, 'clients', 'create', '--name', name, '--callback-secret'],
    env,
  );
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((r) => child.on('exit', r));
  if (code !== 0) throw new Error(`ens clients create exited ${code}: ${err}`);
  const o = JSON.parse(out) as {
    client_id: string;
    client_secret: string;
    callback_secret: string;
  };
  return {
    clientId: o.client_id,
    clientSecret: o.client_secret,
    callbackSecret: o.callback_secret,
  };
}

export async function mintToken(baseUrl: string, c: BenchClient): Promise<string> {
  const res = await fetch(`${baseUrl}/v1/oauth2/token/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: c.clientId,
      client_secret: c.clientSecret,
    }).toString(),
  });
  const body = (await res.json()) as { access_token?: string };
  if (res.status !== 200 || !body.access_token)
    throw new Error(`token request answered ${res.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

export async function provisionTenant(
  baseUrl: string,
  token: string,
  tenant: string,
): Promise<void> {
  const res = await fetch(`${baseUrl}/v2/tenants`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tenant }),
  });
  if (res.status !== 201 && res.status !== 200)
    throw new Error(`POST /v2/tenants answered ${res.status}: ${await res.text()}`);
}
