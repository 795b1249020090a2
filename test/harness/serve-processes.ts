import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@ens/local-engines';
import { spawnEns, type EnsProcess } from './ens-process.ts';
import { waitFor, type Teardown, type TestService } from './service.ts';

// Helpers of the ENS_PROCESSES tests (test/fault/processes*.test.ts): an `ens serve` with several
// processes, spawned in its own process group, and requests that reach any of its processes.

/** One request on a connection of its own, so the cluster hands it to any process. */
export function fresh(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...headers, connection: 'close' },
        agent: false,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
export const childrenOf = (pid: number): number[] => {
  try {
    // Only the ENS processes (tsx, which runs the sources in tests, has an esbuild child too).
    return execFileSync('pgrep', ['-P', String(pid), '-f', 'serve --roles'], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
};
/** The pids the supervisor logged when every process was ready. */
export function readyPids(p: EnsProcess): number[] | null {
  for (const line of p.output().split('\n')) {
    if (!line.includes('"pids"')) continue;
    try {
      return (JSON.parse(line) as { pids: number[] }).pids;
    } catch {
      // a line cut mid-write; the next poll reads it whole
    }
  }
  return null;
}

export async function startServe(
  t: Teardown,
  svc: TestService,
  env: Record<string, string>,
): Promise<{ p: EnsProcess; port: number; pids: number[] }> {
  const port = await freePort();
  const dataDir = await mkdtemp(join(tmpdir(), 'ens-procs-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  const p = spawnEns(
    ['serve'],
    { ...svc.env, ENS_LOG_LEVEL: 'info', ENS_DATA_DIR: dataDir, PORT: String(port), ...env },
    { detached: true },
  );
  t.teardown(async () => {
    if (p.child.exitCode === null) {
      try {
        process.kill(-p.child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
      await p.exited;
    }
  });
  const pids = await waitFor(
    async () =>
      readyPids(p) ?? (p.child.exitCode !== null ? Promise.reject(new Error(p.output())) : null),
    60_000,
    'every process ready',
  );
  return { p, port, pids };
}

export async function tokenFor(port: number, svc: TestService): Promise<string> {
  const issued = await svc.rt.clients.create('procs', true);
  const r = await fresh(
    port,
    'POST',
    '/v1/oauth2/token/',
    { 'content-type': 'application/x-www-form-urlencoded' },
    new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: issued.client_id,
      client_secret: issued.client_secret,
    }).toString(),
  );
  if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`);
  return (JSON.parse(r.text) as { access_token: string }).access_token;
}
