import { freePort } from '@ens/local-engines';

export { freePort };
import {
  loadConfig,
  migrate,
  openRuntime,
  createLogger,
  type Config,
  type Runtime,
} from '@ens/core';
import { isNatsUnavailable } from '@ens/core/internal';
import { startRoles, type Role, type RunningRoles } from '@ens/app/roles';
import { startTestEngines, type TestEngines } from './engines.ts';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

export interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface ApiResponse {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  body: any;
}

export interface TestClient {
  clientId: string;
  clientSecret: string;
  callbackSecret: string | undefined;
  /** A fresh client-credentials token (cached per client). */
  token(): Promise<string>;
  /** Calls the API with this client's token. */
  call(
    method: string,
    path: string,
    opts?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
}

export interface TestService {
  baseUrl: string;
  config: Config;
  rt: Runtime;
  engines: TestEngines;
  roles: RunningRoles;
  /** Environment that points another `ens` process at the same engines and data dir. */
  env: Record<string, string>;
  createClient(opts?: { name?: string; callbackSecret?: boolean }): Promise<TestClient>;
  request(
    method: string,
    path: string,
    opts?: { body?: unknown; headers?: Record<string, string>; raw?: string },
  ): Promise<ApiResponse>;
  /** Provisions a tenant for the client (201 or 200). */
  tenant(client: TestClient, tenant: string): Promise<void>;
  /** Sends a handoff; returns the response. */
  send(client: TestClient, handoff: unknown, key?: string): Promise<ApiResponse>;
  /** Rows of the client's feed, walked to the end from the start. */
  feed(client: TestClient, query?: string): Promise<any[]>;
}

/** Env defaults for tests: fast retries, private callbacks allowed (receivers run on loopback). */
export const TEST_ENV: Record<string, string> = {
  ENS_RETRY_BACKOFF: '100ms,100ms,100ms',
  ENS_CALLBACK_BACKOFF: '100ms,200ms',
  ENS_ALLOW_PRIVATE_CALLBACKS: 'true',
  ENS_LOG_LEVEL: 'warn',
  // One process per `ens serve` a test spawns, unless the test is about ENS_PROCESSES: the tests
  // that kill or count processes mean one process, and the machine has few cores.
  ENS_PROCESSES: '1',
  ENS_RATE_LIMIT: '100000',
  ENS_TOKEN_RATE_LIMIT: '100000',
  ENS_PROVIDER_CONFIG: JSON.stringify({ '@ens/plugin-sandbox': { handsetDelayMs: 100 } }),
};

let keySeq = 0;
/** A unique Idempotency-Key for a test send. */
export function uniqueKey(prefix = 'k'): string {
  return `${prefix}-${process.pid}-${Date.now()}-${++keySeq}`;
}

/** Polls fn until it returns a truthy value, or fails after timeoutMs with the last value seen. */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    last = await fn();
    if (last) return last as T;
    if (Date.now() > until)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`,
      );
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function asResponse(res: Response): Promise<ApiResponse> {
  const text = await res.text();
  let body: unknown;
  try {
    body = text.length > 0 ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** How long a test service's start waits for NATS (or its JetStream quorum) to answer. */
const NATS_WAIT_MS = 30_000;

/**
 * Starts engines and the given roles in this process, with a migrated database. Everything is
 * torn down with the test.
 */
export async function startTestService(
  t: Teardown,
  opts: {
    env?: Record<string, string>;
    roles?: Role[];
    natsUrl?: string;
    /** Where the log lines go (stdout when unset): a test that reads what ENS logs. */
    log?: { write(line: string): void };
    /** The DATABASE_URL to use instead of the engines' own (a failover test adds a standby). */
    databaseUrl?: (engines: TestEngines) => Promise<string>;
    /** Picks the API's port when env.PORT is unset (freePort); for the harness's own test. */
    pickPort?: () => Promise<number>;
  } = {},
): Promise<TestService> {
  const engines = await startTestEngines(t);
  const databaseUrl = opts.databaseUrl ? await opts.databaseUrl(engines) : engines.databaseUrl;
  const dataDir = await mkdtemp(join(tmpdir(), 'ens-data-'));
  t.teardown(() => rm(dataDir, { recursive: true, force: true }));
  // A caller that must know the URL before start (to give it to a provider as a webhook URL) picks
  // the port. Otherwise a free one is picked, and picked again if another process took it before
  // the API listened: parallel test files, and every outbound connection, draw from the same
  // ephemeral ports.
  const pickPort = opts.pickPort ?? freePort;
  const started = async (attempt: number) => {
    const port = opts.env?.PORT !== undefined ? Number(opts.env.PORT) : await pickPort();
    const env: Record<string, string> = {
      ...TEST_ENV,
      DATABASE_URL: databaseUrl,
      NATS_URL: opts.natsUrl ?? engines.natsUrl,
      ENS_DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      ...opts.env,
    };
    try {
      const running = await runRoles(env, opts.roles ?? ['api', 'worker', 'callbacks', 'feed'], {
        log: opts.log,
        migrate: true,
      });
      return { port, env, ...running };
    } catch (err) {
      const taken = (err as NodeJS.ErrnoException).code === 'EADDRINUSE';
      if (taken && opts.env?.PORT === undefined && attempt < 5) return started(attempt + 1);
      // NATS or its JetStream quorum away (a cluster still electing its meta leader) is waited
      // out, as `ens serve` does (untilReachable), up to NATS_WAIT_MS from the first try.
      if (isNatsUnavailable(err) && Date.now() < firstTry + NATS_WAIT_MS) {
        await new Promise((r) => setTimeout(r, 500));
        return started(attempt);
      }
      throw err;
    }
  };
  const firstTry = Date.now();
  const { port, env, config, rt, roles } = await started(1);
  t.teardown(async () => {
    await roles.stop();
    await rt.close();
  });
  const baseUrl = `http://127.0.0.1:${port}`;

  const request: TestService['request'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    let body: string | undefined = o.raw;
    if (o.body !== undefined) {
      body = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    return asResponse(await fetch(baseUrl + path, { method, headers, body }));
  };

  const createClient: TestService['createClient'] = async (o = {}) => {
    const issued = await rt.clients.create(o.name ?? 'test', o.callbackSecret ?? true);
    let cached: string | undefined;
    const token = async () => {
      if (cached) return cached;
      const res = await fetch(`${baseUrl}/v1/oauth2/token/`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'client_credentials',
          client_id: issued.client_id,
          client_secret: issued.client_secret,
        }),
      });
      if (res.status !== 200)
        throw new Error(`token request failed: ${res.status} ${await res.text()}`);
      cached = ((await res.json()) as { access_token: string }).access_token;
      return cached;
    };
    return {
      clientId: issued.client_id,
      clientSecret: issued.client_secret,
      callbackSecret: issued.callback_secret,
      token,
      call: async (method, path, c = {}) =>
        request(method, path, {
          ...c,
          headers: { authorization: `Bearer ${await token()}`, ...c.headers },
        }),
    };
  };

  return {
    baseUrl,
    config,
    rt,
    engines,
    roles,
    env,
    request,
    createClient,
    async tenant(client, tenant) {
      const r = await client.call('POST', '/v2/tenants', { body: { tenant } });
      if (r.status !== 201 && r.status !== 200)
        throw new Error(`tenant create failed: ${r.status} ${r.text}`);
    },
    async send(client, handoff, key = uniqueKey()) {
      return client.call('POST', '/v2/messages', {
        body: handoff,
        headers: { 'idempotency-key': key },
      });
    },
    async feed(client, query = '') {
      const rows: any[] = [];
      let url = `/v2/deliveries?limit=1000${query ? `&${query}` : ''}`;
      for (;;) {
        const r = await client.call('GET', url);
        if (r.status !== 200) throw new Error(`feed failed: ${r.status} ${r.text}`);
        rows.push(...r.body.results);
        if (!r.body.next_cursor) return rows;
        url = `/v2/deliveries?limit=1000&cursor=${encodeURIComponent(r.body.next_cursor)}${query ? `&${query}` : ''}`;
      }
    },
  };
}

/**
 * More roles on `svc`'s engines in a runtime of their own, as another process of the deployment
 * would run them: svc's configuration with `env` over it (the api role listens on its PORT).
 * Stopped with `t`.
 */
export async function startRolesBeside(
  t: Teardown,
  svc: TestService,
  roles: Role[],
  env: Record<string, string> = {},
): Promise<{ rt: Runtime; roles: RunningRoles }> {
  const running = await runRoles({ ...svc.env, ...env }, roles);
  t.teardown(async () => {
    await running.roles.stop();
    await running.rt.close();
  });
  return running;
}

/**
 * Opens a runtime on `env`'s DATABASE_URL and NATS_URL and starts `roles` on it (the api role on
 * env's PORT), migrating first if asked. A failed start closes the runtime: an open one would keep
 * the test file's process alive to tap's timeout.
 */
async function runRoles(
  env: Record<string, string>,
  roles: readonly Role[],
  o: { log?: { write(line: string): void } | undefined; migrate?: boolean } = {},
): Promise<{ config: Config; rt: Runtime; roles: RunningRoles }> {
  const config = loadConfig(env);
  const rt = await openRuntime(
    config,
    { databaseUrl: env.DATABASE_URL!, natsUrl: env.NATS_URL! },
    createLogger(config, o.log),
  );
  try {
    if (o.migrate) await migrate(rt.db);
    return {
      config,
      rt,
      roles: await startRoles(rt, roles, { port: config.port, host: '127.0.0.1' }),
    };
  } catch (err) {
    await rt.close();
    throw err;
  }
}

/**
 * n distinct numbers from `from` on, none of those the sandbox fails (…0000) or makes flaky
 * (…1111).
 */
export function sandboxPhones(n: number, from: number): string[] {
  const out: string[] = [];
  for (let i = from; out.length < n; i++) {
    const p = `+1555${String(i).padStart(7, '0')}`;
    if (!p.endsWith('0000') && !p.endsWith('1111')) out.push(p);
  }
  return out;
}

/** A minimal valid sms handoff for `tenant`. */
export function smsHandoff(
  tenant: string,
  recipients: string[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    tenant,
    event_type: 'test.event',
    messages: [{ channel: 'sms', recipients, content: { kind: 'rendered', body: 'hello' } }],
    ...extra,
  };
}
