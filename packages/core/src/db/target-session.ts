import { EnsError } from '@ens/plugin-sdk';
import pg from 'pg';
import type { PostgresHost, TargetSessionAttrs } from './libpq-url.ts';

/*
 * libpq's target_session_attrs for node-postgres, which has no such thing: every connection a pool
 * opens goes to a host whose session is what the URL asks for, checked on the connection itself,
 * so a connection that lands on a standby is never handed out for a write. The check costs nothing
 * on PostgreSQL 14 and later (the server reports `in_hot_standby` and
 * `default_transaction_read_only` at start-up, which is how libpq checks them), one query before.
 *
 * Which host is the right one is remembered (HostFinder) so that a new connection goes straight
 * to it; when it refuses (killed, or no longer a primary after a failover) the hosts are tried
 * again in order, by short-lived probe connections, once for every waiting caller. The connection
 * whose host failed is lost to its caller, who sees it as an outage of PostgreSQL and retries as
 * it does for one (a 503 with Retry-After, a start that waits, a loop that tries again).
 */

/** What a session is, as target_session_attrs judges it. */
export interface SessionState {
  /** The server is a standby (hot standby, in recovery). */
  inRecovery: boolean;
  /** Read-write transactions refused by default: a standby, or default_transaction_read_only. */
  readOnly: boolean;
}

/** Why a session does not suit `target`, or undefined when it does; libpq's rules. */
export function refusal(
  target: TargetSessionAttrs,
  s: SessionState,
  pass: 'first' | 'fallback' = 'first',
): string | undefined {
  switch (target) {
    case 'any':
      return undefined;
    case 'read-write':
      if (s.inRecovery) return 'a standby (in recovery), which takes no writes';
      return s.readOnly ? 'read-only (default_transaction_read_only is on)' : undefined;
    case 'read-only':
      return s.readOnly ? undefined : 'read-write, not read-only';
    case 'primary':
      return s.inRecovery ? 'a standby (in recovery), not a primary' : undefined;
    case 'standby':
      return s.inRecovery ? undefined : 'a primary, not a standby';
    case 'prefer-standby':
      return pass === 'fallback' || s.inRecovery ? undefined : 'a primary (a standby is preferred)';
  }
}

/**
 * No host of the URL gives a session that suits target_session_attrs just now: each is named with
 * why (refused the connection, a standby, read-only). A failover in progress looks like this, so it
 * is an outage to wait out (isDatabaseUnavailable), not a configuration error.
 */
export class NoSuitableHostError extends EnsError {
  static override readonly code: string = 'ENS_ERR_DB_NO_SUITABLE_HOST';
  readonly refusals: readonly { host: string; why: string }[];
  constructor(target: TargetSessionAttrs, refusals: { host: string; why: string }[]) {
    super(
      `no PostgreSQL host of DATABASE_URL gives a ${target} session (target_session_attrs=${target}): ` +
        refusals.map((r) => `${r.host}: ${r.why}`).join('; '),
    );
    this.refusals = refusals;
  }
}

export const hostName = (h: PostgresHost) =>
  h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`;

/** The session as target_session_attrs judges it: from what the server reported, or asked. */
async function sessionState(
  client: pg.Client,
  reported: ReadonlyMap<string, string>,
): Promise<SessionState> {
  const standby = reported.get('in_hot_standby');
  const readOnly = reported.get('default_transaction_read_only');
  if (standby !== undefined && readOnly !== undefined)
    return { inRecovery: standby === 'on', readOnly: standby === 'on' || readOnly === 'on' };
  // Before PostgreSQL 14 neither is reported; libpq asks the same.
  const { rows } = await client.query<{ r: boolean; ro: string }>(
    `SELECT pg_catalog.pg_is_in_recovery() AS r, current_setting('transaction_read_only') AS ro`,
  );
  return { inRecovery: rows[0]!.r, readOnly: rows[0]!.r || rows[0]!.ro === 'on' };
}

/** Points a client that has not connected yet at `host`. */
function aim(client: pg.Client, host: PostgresHost): void {
  client.host = host.host;
  client.port = host.port;
  const params = (client as unknown as { connectionParameters: { host: string; port: number } })
    .connectionParameters;
  params.host = host.host;
  params.port = host.port;
}

type Pass = 'first' | 'fallback';

/**
 * Connects `client` (new) to `host` with `connect` (its own connect, or the one it overrides) and
 * judges its session; resolves with why it does not suit, or undefined when it does. A refused
 * connection rejects.
 */
async function connectAndJudge(
  client: pg.Client,
  connect: () => Promise<unknown>,
  to: { host: PostgresHost; pass: Pass },
  target: TargetSessionAttrs,
): Promise<string | undefined> {
  aim(client, to.host);
  const reported = new Map<string, string>();
  client.connection.on(
    'parameterStatus',
    (m: { parameterName: string; parameterValue: string }) =>
      void reported.set(m.parameterName, m.parameterValue),
  );
  await connect();
  return refusal(target, await sessionState(client, reported), to.pass);
}

/**
 * While no host suits (a primary dead, its standby not promoted yet), every new connection of
 * every pool would start a search of its own, each a connection and an authentication per host:
 * one search per this long at most, the callers between them answered with its error.
 */
const RESEARCH_MS = 100;

/**
 * Remembers which host of a list gives a suitable session, and finds one again when it stops.
 * Shared by every pool of a process made from the same URL, so one search serves them all.
 */
export class HostFinder {
  readonly hosts: readonly PostgresHost[];
  readonly target: TargetSessionAttrs;
  readonly #probeConfig: pg.ClientConfig;
  #current: { host: PostgresHost; pass: Pass } | undefined;
  #finding: Promise<{ host: PostgresHost; pass: Pass }> | undefined;
  /** The last search that found nothing, answered again to callers until it is RESEARCH_MS old. */
  #failed: { at: number; error: unknown } | undefined;

  /** `probeConfig`: how a probe connects (URL, timeout); its host and port are set per host. */
  constructor(
    hosts: readonly PostgresHost[],
    target: TargetSessionAttrs,
    probeConfig: pg.ClientConfig,
  ) {
    this.hosts = hosts;
    this.target = target;
    this.#probeConfig = probeConfig;
  }

  /**
   * The host to connect to: the last one that suited, or the first that suits now (probed in
   * order); `pass` is 'fallback' for a prefer-standby host that is not a standby.
   */
  pick(): Promise<{ host: PostgresHost; pass: Pass }> {
    if (this.#current) return Promise.resolve(this.#current);
    if (this.#failed && Date.now() - this.#failed.at < RESEARCH_MS)
      return Promise.reject(this.#failed.error);
    this.#finding ??= this.#find()
      .then(
        (found) => {
          this.#failed = undefined;
          return found;
        },
        (error: unknown) => {
          this.#failed = { at: Date.now(), error };
          throw error;
        },
      )
      .finally(() => {
        this.#finding = undefined;
      });
    return this.#finding;
  }

  /** A connection to `host` failed or did not suit: the next pick searches again. */
  refused(host: PostgresHost): void {
    if (this.#current?.host === host) this.#current = undefined;
  }

  async #find(): Promise<{ host: PostgresHost; pass: Pass }> {
    const refusals: { host: string; why: string }[] = [];
    // prefer-standby: a standby first, then, as libpq does, any host.
    const passes =
      this.target === 'prefer-standby' ? (['first', 'fallback'] as const) : ['first' as const];
    for (const pass of passes) {
      for (const host of this.hosts) {
        const probe = new pg.Client(this.#probeConfig);
        // A probe cut off mid-start must not end the process.
        probe.on('error', () => {});
        let why: string | undefined;
        try {
          why = await connectAndJudge(probe, () => probe.connect(), { host, pass }, this.target);
        } catch (e) {
          why = `could not connect: ${(e as Error).message}`;
        } finally {
          await probe.end().catch(() => {});
        }
        if (why === undefined) {
          // A fallback host of prefer-standby is not kept: the next connection looks for a standby.
          if (pass === 'first') this.#current = { host, pass };
          return { host, pass };
        }
        refusals.push({ host: hostName(host), why });
      }
    }
    throw new NoSuitableHostError(this.target, refusals);
  }

  /**
   * A node-postgres Client class for a pool: each connects to the host `pick` gives, and is refused
   * (ended, and its connect rejected) when its own session does not suit, so a pool never holds one
   * that does not.
   */
  clientClass(): typeof pg.Client {
    const finder = this;
    return class TargetSessionClient extends pg.Client {
      // node-postgres's pool calls connect(callback); callers may await connect().
      override connect(): Promise<pg.Client>;
      override connect(callback: (err: Error | null) => void): void;
      override connect(callback?: (err: Error | null) => void): Promise<pg.Client> | undefined {
        const connected = this.#connect();
        if (!callback) return connected;
        connected.then(
          () => callback(null),
          (e: Error) => callback(e),
        );
      }

      async #connect(): Promise<pg.Client> {
        const to = await finder.pick();
        const { host } = to;
        // The pool gives up on a connection that takes too long by destroying its socket; one
        // that waited out a search has nothing left to connect with.
        if (this.connection.stream.destroyed)
          throw new Error('timeout exceeded when trying to connect');
        let why: string | undefined;
        try {
          why = await connectAndJudge(this, () => super.connect(), to, finder.target);
        } catch (e) {
          finder.refused(host);
          throw e;
        }
        if (why !== undefined) {
          finder.refused(host);
          await this.end().catch(() => {});
          throw new NoSuitableHostError(finder.target, [{ host: hostName(host), why }]);
        }
        return this;
      }
    };
  }
}
