import path from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient } from '@nats-io/jetstream';
import { pino, type Logger } from 'pino';
import { ConfigError, type Config } from './config/load.ts';
import { createAsyncCommitPool, createPool, type Db } from './db/pool.ts';
import { DirectoryMediaStore } from './media/directory-store.ts';
import type { MediaStore } from './media/media-store.ts';
import { measureBacklogIn } from './backlog.ts';
import { logSerializers } from './log-redaction.ts';
import { connectNats, ensureTopology } from './nats/topology.ts';
import { resolveMasterKey } from './secrets/master-key.ts';
import { deriveKey, SecretBox } from './secrets/secret-box.ts';
import { CallbackStore } from './store/callbacks.ts';
import { ClientStore } from './store/clients.ts';
import { DeliveryStore } from './store/deliveries.ts';
import { TenantStore } from './store/tenants.ts';
import { DeviceStore } from './store/devices.ts';
import { ProcessSession, SessionReaper } from './store/process-sessions.ts';
import { SuppressionStore } from './store/suppressions.ts';

/** Everything a role needs, opened once per process. */
export interface Runtime {
  config: Config;
  logger: Logger;
  db: Db;
  /** The pool of the synchronous hot batch statements (outcomes, feed stamps); see queryByIds. */
  keyed: Db;
  nc: NatsConnection;
  js: JetStreamClient;
  clients: ClientStore;
  tenants: TenantStore;
  devices: DeviceStore;
  deliveries: DeliveryStore;
  callbacks: CallbackStore;
  suppressions: SuppressionStore;
  /**
   * This process's session, which its claims record (store/process-sessions.ts): started by the
   * roles that claim (worker, callbacks), ended when the last of them stops.
   */
  session: ProcessSession;
  /** Ends the sessions of dead or paused processes and their claims (the dead-sessions job). */
  reaper: SessionReaper;
  media: MediaStore;
  /** Key for signing access tokens, derived from the master key. */
  tokenKey: Buffer;
  /**
   * Key for the signed per-delivery tokens: return paths (VERP) and one-click unsubscribe links.
   */
  consentKey: Buffer;
  /** Declares the JetStream topology again (after a NATS restart that lost its store). */
  redeclareTopology(): Promise<unknown>;
  /** Registers a listener called after NATS reconnected and the topology was declared again. */
  onNatsReconnect(listener: () => void): void;
  close(): Promise<void>;
}

/**
 * The configured media store. An S3 bucket is checked once here, so that a wrong bucket, region
 * or credential stops the start with S3's own answer instead of failing the first image later.
 */
async function openMediaStore(config: Config): Promise<MediaStore> {
  const m = config.media;
  if (m.kind === 'directory') return new DirectoryMediaStore(path.join(config.dataDir, 'media'));
  // Loaded here, not with the module: the AWS SDK costs every ENS process about 0.27 s of CPU at
  // start, and only a deployment with ENS_MEDIA_STORE=s3 uses it.
  const { S3MediaStore } = await import('./media/s3-store.ts');
  const store = new S3MediaStore({
    bucket: m.bucket,
    region: m.region,
    endpoint: m.endpoint,
    forcePathStyle: m.forcePathStyle,
    prefix: m.prefix,
  });
  try {
    await store.check();
  } catch (e) {
    store.close();
    throw new ConfigError(
      `ENS_MEDIA_STORE=s3: ${(e as Error).message} (check ENS_S3_BUCKET, ENS_S3_REGION, ENS_S3_ENDPOINT and the AWS credentials)`,
    );
  }
  return store;
}

export function createLogger(
  config: Pick<Config, 'logLevel'>,
  destination?: pino.DestinationStream,
): Logger {
  // The serializers keep secret query values out of every logged URL (log-redaction.ts).
  const options = { level: config.logLevel, base: { service: 'ens' }, serializers: logSerializers };
  return destination ? pino(options, destination) : pino(options);
}

/** How long closing waits for NATS subscriptions to drain before it closes the connection. */
const DRAIN_WAIT_MS = 5_000;

/**
 * Connections one process opens when it runs alone: 26 for the work, 20 for claims and callback
 * records (asynchronous commit), 4 for the outcomes and feed stamps; the last two are the hot batch
 * statements' own pools (createPool's `byIds`).
 */
const POOL = { db: 26, leases: 20, keyed: 4 };

/**
 * A process's share of the connections when `processes` of one `ens serve` run side by side: the
 * deployment keeps about what one process used (a PostgreSQL's max_connections is the same
 * whatever the core count), with a floor below which batching could not keep a process busy.
 */
export function poolSizes(processes: number): { db: number; leases: number; keyed: number } {
  if (processes <= 1) return POOL;
  // keyed: two finishes in flight and the feed stamper.
  return {
    db: Math.max(8, Math.ceil(POOL.db / processes)),
    leases: Math.max(4, Math.ceil(POOL.leases / processes)),
    keyed: Math.max(3, Math.ceil(POOL.keyed / processes)),
  };
}

/**
 * Opens PostgreSQL and NATS (declaring the JetStream topology) at the given addresses.
 * `processes`: how many processes of one `ens serve` share the database (see poolSizes).
 */
export async function openRuntime(
  config: Config,
  urls: { databaseUrl: string; natsUrl: string },
  logger: Logger = createLogger(config),
  opts: { processes?: number } = {},
): Promise<Runtime> {
  const masterKey = await resolveMasterKey(config.masterKey, config.dataDir);
  const box = new SecretBox(masterKey);
  const pools = poolSizes(opts.processes ?? 1);
  /*
   * A process paused (SIGSTOP, a frozen VM) inside a transaction kept its row locks, and with them
   * the dead-sessions job, which waited on those rows, for the whole pause: in the soak, a worker
   * paused for 62 s held up the retry of every process's lost work, and deliveries waited 62-116 s
   * (2026-11-27, round 43). PostgreSQL now ends such a session after twice ENS_SESSION_TIMEOUT,
   * rolling its transaction back; the process, once resumed, finds its connection gone and tries
   * again on another, and its claims were ended meanwhile as a dead session's are. No ENS
   * transaction waits on anything but PostgreSQL between its statements.
   */
  const idleInTransactionMs = 2 * config.sessionTimeoutMs;
  const db = createPool(urls.databaseUrl, { max: pools.db, idleInTransactionMs });
  const leases = createAsyncCommitPool(urls.databaseUrl, {
    max: pools.leases,
    applicationName: 'ens-leases',
    byIds: true,
    idleInTransactionMs,
  });
  const keyed = createPool(urls.databaseUrl, {
    max: pools.keyed,
    applicationName: 'ens-keyed',
    byIds: true,
    idleInTransactionMs,
  });
  // One connection of its own: a beat never waits behind the work in the other pools.
  const beats = createPool(urls.databaseUrl, { max: 1, applicationName: 'ens-session' });
  const session = new ProcessSession(beats, config.sessionTimeoutMs, logger);
  let nc: NatsConnection | undefined;
  try {
    nc = await connectNats(urls.natsUrl, 'ens');
    const js = await ensureTopology(nc, config.natsReplicas, logger);
    const conn = nc;
    const redeclareTopology = () => ensureTopology(conn, config.natsReplicas, logger);
    const reconnectListeners: (() => void)[] = [];
    // A NATS server restarted without its store has no streams: declare them again on reconnect so
    // wake-ups can be published; what was lost is re-sent by the sweepers from PostgreSQL.
    void (async () => {
      for await (const s of conn.status()) {
        if (s.type !== 'reconnect') continue;
        // The consume loops first: they need only their consumers' leaders (and declare what is
        // gone themselves), not the meta leader an election after a lost node may still be
        // choosing.
        for (const l of reconnectListeners) l();
        await redeclareTopology().catch((err: unknown) =>
          logger.warn({ err }, 'could not re-declare JetStream topology'),
        );
      }
    })();
    const media = await openMediaStore(config);
    measureBacklogIn(db);
    return {
      config,
      logger,
      db,
      keyed,
      nc: conn,
      js,
      clients: new ClientStore(db, box),
      tenants: new TenantStore(db),
      devices: new DeviceStore(db),
      // The stores publish the next stage's wake-ups themselves, after their own commits.
      deliveries: new DeliveryStore(db, { leases, keyed }, { nc: conn, logger }, session),
      callbacks: new CallbackStore(db, leases, { nc: conn, logger }, session),
      suppressions: new SuppressionStore(
        db,
        { softBounceHoldMs: config.consent.softBounceHoldMs },
        { nc: conn, logger },
      ),
      session,
      reaper: new SessionReaper(db, session, { nc: conn, logger }),
      media,
      tokenKey: deriveKey(masterKey, 'access-token'),
      consentKey: deriveKey(masterKey, 'consent-tokens'),
      redeclareTopology,
      onNatsReconnect: (l) => void reconnectListeners.push(l),
      async close() {
        media.close?.();
        measureBacklogIn(null);
        // A drain waits for every subscription to finish; one left open by a role that failed to
        // start (a port in use) would keep the process from ever exiting. Bounded, then closed.
        await Promise.race([
          conn.drain(),
          new Promise((r) => setTimeout(r, DRAIN_WAIT_MS).unref()),
        ]).catch(() => {});
        await conn.close().catch(() => {});
        await Promise.all([db.end(), leases.end(), keyed.end(), beats.end()]);
      },
    };
  } catch (e) {
    await nc?.close().catch(() => {});
    await Promise.all([db.end(), leases.end(), keyed.end(), beats.end()]);
    throw e;
  }
}
