import os from 'node:os';
import path from 'node:path';
import { CHANNELS } from '../schemas/channel.ts';
import { ConfigError } from './config-error.ts';
import {
  backoff,
  choice,
  custom,
  duration,
  flag,
  integer,
  optionalText,
  text,
  type EnvVar,
} from './env-var.ts';

/*
 * Every environment variable ENS reads, each declared once: name, meaning, schema, default and the
 * typed value. Adding one is a line here plus its use; the configuration reference
 * (docs/reference/configuration.md) is generated from this list (`npm run config-table`), and a
 * test fails when the two disagree.
 */

const PACKAGE_NAME = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;
const CHANNEL_NAME = `(${CHANNELS.join('|')})`;
const SANDBOX = Object.freeze(['@ens/plugin-sandbox']);

export type Providers = Readonly<Record<(typeof CHANNELS)[number], readonly string[]>>;

/**
 * `sms=@ens/plugin-twilio|@ens/plugin-smpp,email=@ens/plugin-smtp`: `|` separates fail-over
 * choices.
 */
function parseProviders(v: string | undefined): Providers {
  const out: Record<string, readonly string[]> = Object.fromEntries(
    CHANNELS.map((c) => [c, SANDBOX]),
  );
  const seen = new Set<string>();
  for (const pair of (v ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [channel, list] = pair.split('=') as [string, string];
    if (seen.has(channel))
      throw new ConfigError(
        `ENS_PROVIDERS: ${channel} is named twice; list its providers once, separated by |`,
      );
    seen.add(channel);
    const pkgs = list.split('|').map((p) => p.trim());
    const bad = pkgs.find((p) => !PACKAGE_NAME.test(p));
    if (bad !== undefined)
      throw new ConfigError(
        `ENS_PROVIDERS: ${channel}=${list}: "${bad}" is not an npm package name`,
      );
    if (new Set(pkgs).size !== pkgs.length)
      throw new ConfigError(`ENS_PROVIDERS: ${channel} lists a provider twice`);
    out[channel] = Object.freeze(pkgs);
  }
  return Object.freeze(out) as Providers;
}

/** `@ens/plugin-twilio=50,@ens/plugin-smtp=14`: sends per second per provider package. */
function parseProviderPace(v: string | undefined): ReadonlyMap<string, { perSecond: number }> {
  const out = new Map<string, { perSecond: number }>();
  for (const pair of (v ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = pair.lastIndexOf('=');
    const pkg = pair.slice(0, at).trim();
    const rate = Number(pair.slice(at + 1).trim());
    if (
      at < 0 ||
      !PACKAGE_NAME.test(pkg) ||
      !Number.isFinite(rate) ||
      rate <= 0 ||
      rate > 100_000
    ) {
      throw new Error(
        `takes package=sends-per-second pairs, such as @ens/plugin-twilio=50; "${pair}" is not one`,
      );
    }
    if (out.has(pkg)) throw new Error(`${pkg} is named twice`);
    out.set(pkg, { perSecond: rate });
  }
  return out;
}

function parseJsonObject(v: string | undefined): Readonly<Record<string, unknown>> {
  if (v === undefined) return Object.freeze({});
  try {
    const o = JSON.parse(v) as unknown;
    if (o !== null && typeof o === 'object' && !Array.isArray(o))
      return Object.freeze(o as Record<string, unknown>);
  } catch {
    // reported below
  }
  throw new Error(
    'must be a JSON object keyed by plugin package name, such as {"@ens/plugin-sandbox": ' +
      '{"handsetDelayMs": 400}}',
  );
}

export const VARIABLES = {
  port: integer('PORT', {
    default: 8080,
    max: 65535,
    doc: 'HTTP port of the api role (`0`: any free port)',
  }),
  healthPort: integer('ENS_HEALTH_PORT', {
    default: 0,
    max: 65535,
    shown: 'unset',
    doc:
      'in a process without the api role: the port that serves `/healthz`, `/readyz` and ' +
      '`/metrics` (unset: none); the api role serves them on `PORT`',
  }),
  processes: integer('ENS_PROCESSES', {
    default: os.availableParallelism(),
    min: 1,
    max: 256,
    shown: 'the number of cores',
    doc:
      '`ens serve` runs this many processes, supervised, each with the chosen roles (the feed ' +
      'role in one of them); `1` runs everything in one process (see [Every ' +
      'core](../guides/deploying.md#every-core-ens_processes))',
  }),
  host: text('HOST', {
    default: '127.0.0.1',
    doc: 'address to listen on (`0.0.0.0` to serve other machines)',
  }),
  databaseUrl: optionalText('DATABASE_URL', {
    pattern: '^postgres(ql)?://',
    doc:
      "PostgreSQL URL; libpq's multi-host form " +
      '(`postgres://…@h1:5432,h2:5432/ens?target_session_attrs=read-write`) finds the primary ' +
      'again after a failover (see [A PostgreSQL ' +
      'failover](../guides/operating.md#a-postgresql-failover)). Unset: ENS starts its own ' +
      'PostgreSQL under `ENS_DATA_DIR/postgres`',
  }),
  natsUrl: optionalText('NATS_URL', {
    doc:
      "NATS URL (JetStream enabled); a cluster's servers comma-separated. Unset: ENS starts " +
      '`nats-server -js` under `ENS_DATA_DIR/nats`',
  }),
  natsReplicas: integer('ENS_NATS_REPLICAS', {
    default: 1,
    min: 1,
    max: 5,
    doc:
      'copies JetStream keeps of each stream ENS declares: `3` on a three-node cluster survives ' +
      'the loss of a node',
  }),
  pluginDir: custom('ENS_PLUGIN_DIR', {
    shown: 'unset',
    doc:
      'a directory provider plugins are installed into (`npm install --prefix DIR PACKAGE`), ' +
      "looked in before ENS's own packages; the repository's `package.json` and lock file stay " +
      'untouched (see [Writing a provider ' +
      'plugin](../guides/writing-a-provider-plugin.md#installing-a-plugin))',
    transform: (raw) => (raw === undefined ? undefined : path.resolve(raw)),
  }),
  dataDir: custom('ENS_DATA_DIR', {
    shown: '`./.ens`',
    doc: 'local state: self-started engines, inline images (`media/`), the generated master key',
    transform: (raw) => path.resolve(raw ?? './.ens'),
  }),
  masterKey: optionalText('ENS_MASTER_KEY', {
    pattern: '^[A-Za-z0-9+/=_-]{43,}$',
    doc:
      'base64 key (≥ 32 bytes, `openssl rand -base64 32`) that encrypts callback secrets at ' +
      'rest and signs access tokens. Unset: one is generated into `ENS_DATA_DIR/master.key`. ' +
      ('**Set it in production**, identically on every process; losing it makes stored callback ' +
        'secrets unreadable'),
  }),
  tokenTtlSeconds: integer('ENS_TOKEN_TTL', {
    default: 3600,
    min: 1,
    doc: 'access-token lifetime in seconds (`expires_in`)',
  }),
  retryBackoffMs: backoff('ENS_RETRY_BACKOFF', {
    default: '1s,10s,1m,10m,1h',
    doc:
      'delays before each retry of a transient provider failure; the number of entries is the ' +
      'number of retries',
  }),
  callbackBackoffMs: backoff('ENS_CALLBACK_BACKOFF', {
    default: '1s,10s,1m,10m,1h',
    doc: 'delays before each retry of a callback post; after the last, the callback is a dead letter',
  }),
  callbackTimeoutMs: duration('ENS_CALLBACK_TIMEOUT', {
    default: '10s',
    doc: 'time a receiver has to answer a callback post',
  }),
  allowPrivateCallbacks: flag('ENS_ALLOW_PRIVATE_CALLBACKS', {
    default: false,
    doc:
      'let ENS reach loopback, private and link-local addresses a client supplied: callback ' +
      'URLs, Web Push endpoints, alert webhooks (internal receivers, tests)',
  }),
  idempotencyTtlMs: duration('ENS_IDEMPOTENCY_TTL', {
    default: '24h',
    doc: 'how long Idempotency-Keys are kept',
  }),
  retentionMs: duration('ENS_RETENTION', {
    default: '30d',
    doc:
      'how long the record of a handoff (its deliveries, attempts, provider events, callbacks) ' +
      'is kept; older ones are removed once all their deliveries and callbacks have ended (see ' +
      '[Retention](../guides/retention.md)). At least `ENS_IDEMPOTENCY_TTL`',
  }),
  maxRecipients: integer('ENS_MAX_RECIPIENTS', {
    default: 10_000,
    min: 1,
    doc: 'recipients per message entry (over → 400)',
  }),
  httpHeadersTimeoutMs: duration('ENS_HTTP_HEADERS_TIMEOUT', {
    default: '20s',
    doc:
      "time a connection has to send a request's headers, from its first byte (or from its " +
      'opening); then it is closed: a client sending a header line now and then cannot hold a ' +
      'connection. Every HTTP port ENS serves (the API, the console, webhooks, `ENS_HEALTH_PORT`)',
  }),
  httpRequestTimeoutMs: duration('ENS_HTTP_REQUEST_TIMEOUT', {
    default: '30s',
    doc:
      'time a client has to send a whole request, body included (a body trickled a byte at a ' +
      'time is cut off: 408). At least `ENS_HTTP_HEADERS_TIMEOUT`; raise it for large bodies ' +
      'over slow links',
  }),
  httpIdleTimeoutMs: duration('ENS_HTTP_IDLE_TIMEOUT', {
    default: '65s',
    doc:
      'an open connection that sends or receives nothing for this long is closed, a kept-alive ' +
      'one between requests too. Keep it above the idle timeout of a load balancer in front (60 ' +
      's on AWS ALB)',
  }),
  maxBodyBytes: integer('ENS_MAX_BODY_BYTES', {
    default: 20 * 1024 * 1024,
    min: 1,
    doc: 'request body limit in bytes (over → 413)',
  }),
  maxImageBytes: integer('ENS_MAX_IMAGE_BYTES', {
    default: 5 * 1024 * 1024,
    min: 1,
    doc: 'decoded size of one inline image (over → 413)',
  }),
  rateLimit: integer('ENS_RATE_LIMIT', {
    default: 200,
    min: 1,
    doc: 'requests per second per client on `/v2/`, unless set per client',
  }),
  dailyQuota: integer('ENS_DAILY_QUOTA', {
    default: 0,
    shown: '`0` (none)',
    doc: 'messages per channel per UTC day per client, unless set per client',
  }),
  tokenRateLimit: integer('ENS_TOKEN_RATE_LIMIT', {
    default: 60,
    min: 1,
    doc:
      'token requests per minute from one address; failed attempts have smaller budgets (see ' +
      '[Limits and quotas](limits.md#requests-and-quotas))',
  }),
  workerConcurrency: integer('ENS_WORKER_CONCURRENCY', {
    default: 64,
    min: 1,
    doc: 'sends in flight per channel per worker process',
  }),
  sendWindow: integer('ENS_SEND_WINDOW', {
    default: 100_000,
    min: 1,
    max: 1_000_000,
    doc:
      'wake-ups a worker process holds per channel from its bulk lane to choose the next send ' +
      'fairly among clients and tenants (see [Fair delivery](../guides/fair-delivery.md))',
  }),
  leaseMs: duration('ENS_LEASE', {
    default: '60s',
    doc:
      'how long a worker holds a delivery for one attempt; a provider call is cut off at 80 % of ' +
      'it (30 s at most)',
  }),
  sessionTimeoutMs: duration('ENS_SESSION_TIMEOUT', {
    default: '5s',
    doc:
      'how long a worker, callbacks or api process may go without its heartbeat (one a second) ' +
      'before another declares it dead (killed or paused) and retries its work at once; a ' +
      'transaction left idle twice this long (its process paused) is ended by PostgreSQL, ' +
      'releasing its locks',
  }),
  sweepGraceMs: duration('ENS_SWEEP_GRACE', {
    default: '30s',
    doc: 'how long past due a delivery or callback may sit before the sweeper re-enqueues it',
  }),
  providers: custom('ENS_PROVIDERS', {
    shown: 'sandbox everywhere',
    pattern: `^\\s*${CHANNEL_NAME}=[^,]+(,\\s*${CHANNEL_NAME}=[^,]+)*\\s*$`,
    doc:
      'provider plugin packages per channel, `\\|` between fail-over choices, e.g. ' +
      '`sms=@ens/plugin-twilio\\|@ens/plugin-smpp,email=@ens/plugin-smtp` (see ' +
      '[Providers](../guides/providers.md))',
    transform: parseProviders,
  }),
  providerConfig: custom('ENS_PROVIDER_CONFIG', {
    shown: '`{}`',
    pattern: '^\\s*\\{',
    doc: 'JSON object of plugin settings keyed by package name',
    transform: parseJsonObject,
  }),
  providerPace: custom('ENS_PROVIDER_PACE', {
    shown: 'none (what plugins declare)',
    doc:
      'sends per second per provider, across all worker processes, e.g. ' +
      '`@ens/plugin-twilio=50,@ens/plugin-smtp=14`; overrides the pace a plugin declares (see ' +
      '[Provider pacing](../guides/fair-delivery.md#provider-pacing))',
    transform: parseProviderPace,
  }),
  failoverThreshold: integer('ENS_FAILOVER_THRESHOLD', {
    default: 5,
    min: 1,
    doc:
      'sends in 10 s (more than half failing transiently) that take a provider out of its ' +
      "channel's list",
  }),
  failoverCooldownMs: duration('ENS_FAILOVER_COOLDOWN', {
    default: '30s',
    doc: 'how long a provider stays out before a trial send',
  }),
  mediaGraceMs: duration('ENS_MEDIA_GRACE', {
    default: '1h',
    doc:
      'how long an inline image is kept after it was last written once no pending delivery uses ' +
      'it (longer than any accept takes)',
  }),
  media: {
    store: choice('ENS_MEDIA_STORE', ['directory', 's3'], {
      default: 'directory',
      doc: 'where inline images are kept: `directory` (`ENS_DATA_DIR/media`) or `s3`',
    }),
    bucket: optionalText('ENS_S3_BUCKET', {
      pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$',
      doc: 'the bucket, required with `ENS_MEDIA_STORE=s3`',
    }),
    region: text('ENS_S3_REGION', { default: 'us-east-1', doc: "the bucket's region" }),
    endpoint: optionalText('ENS_S3_ENDPOINT', {
      pattern: '^https?://',
      shown: 'AWS',
      doc: 'endpoint of an S3-compatible service, e.g. `http://minio:9000`',
    }),
    forcePathStyle: flag('ENS_S3_FORCE_PATH_STYLE', {
      default: false,
      doc: '`true` for services without virtual-host buckets (MinIO, Ceph)',
    }),
    prefix: text('ENS_S3_PREFIX', {
      default: '',
      pattern: '^[^/].*$',
      shown: 'none',
      doc: 'key prefix inside the bucket',
    }),
  },
  consent: {
    returnPathDomain: optionalText('ENS_RETURN_PATH_DOMAIN', {
      pattern: '^(?=.{1,253}$)([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z]{2,63}$',
      doc:
        'domain whose mail the `inbound` role receives (its MX points there): emails are sent ' +
        'with a signed per-delivery return path at it, so bounces and complaints come back, and ' +
        'the one-click unsubscribe offers a mailto at it. Unset: no return path is set and ' +
        'bounces by mail are not read',
    }),
    softBounceHoldMs: duration('ENS_SOFT_BOUNCE_HOLD', {
      default: '24h',
      doc:
        'how long a soft bounce (a full mailbox, a greylisting relay that gave up) suppresses ' +
        'its address',
    }),
    unsubscribeTtlMs: duration('ENS_UNSUBSCRIBE_TTL', {
      default: '60d',
      doc:
        'how long a one-click unsubscribe link keeps working after its email was sent (mailbox ' +
        'providers ask for at least 30 days); after it, or once retention removed the delivery, ' +
        'the link answers 404',
    }),
    unsubscribeRateLimit: integer('ENS_UNSUBSCRIBE_RATE_LIMIT', {
      default: 600,
      min: 1,
      doc:
        'requests per minute from one address to the one-click unsubscribe page and its POST ' +
        "(`/unsubscribe/…`); a mailbox provider posts its users' unsubscribes from few " +
        'addresses, so keep it generous',
    }),
  },
  // The `inbound` role: an SMTP listener for the return-path domain (services/inbound).
  inbound: {
    port: integer('ENS_INBOUND_PORT', {
      default: 2525,
      max: 65535,
      doc:
        "SMTP port of the `inbound` role (`0`: any free port). The return-path domain's MX is " +
        'reached on port 25: forward 25 here (a load balancer, a NAT rule), or set `25` where ' +
        'the process may bind it',
    }),
    host: custom('ENS_INBOUND_HOST', {
      shown: '`HOST`',
      doc: 'address the `inbound` role listens on',
      transform: (raw, env) => raw ?? env.HOST ?? '127.0.0.1',
    }),
    maxMessageBytes: integer('ENS_INBOUND_MAX_MESSAGE_BYTES', {
      default: 5 * 1024 * 1024,
      min: 1024,
      max: 100 * 1024 * 1024,
      doc:
        'largest message the `inbound` role takes, advertised with SMTP SIZE (over → 552 5.3.4). ' +
        'Bounces often quote the message they are about: leave room for your largest email',
    }),
    peerRateLimit: integer('ENS_INBOUND_PEER_RATE_LIMIT', {
      default: 120,
      min: 1,
      doc:
        'SMTP connections plus messages per minute one remote address (an IPv6 /64) may open or ' +
        'send to the `inbound` role, per process; over it the peer is answered 421 4.7.0 and ' +
        'retries later',
    }),
    timeoutMs: duration('ENS_INBOUND_TIMEOUT', {
      default: '2m',
      doc:
        'how long the `inbound` role waits for the next command or data on an SMTP connection ' +
        'before closing it',
    }),
    feedbackAddress: optionalText('ENS_INBOUND_FEEDBACK_ADDRESS', {
      pattern: '^[^\\s@<>()",;:\\\\\\[\\]]+@[^\\s@<>()",;:\\\\\\[\\]]+$',
      doc:
        "an address (its domain's MX reaching the `inbound` role) registered with mailbox " +
        "providers' complaint feedback loops (Yahoo, Microsoft JMRP): ARF reports sent to it are " +
        'matched to their delivery through the signed return path they quote. Unset: only ' +
        'reports sent to a return path are read',
    }),
    tlsCert: optionalText('ENS_INBOUND_TLS_CERT', {
      doc:
        'PEM certificate (chain) file: the `inbound` role offers STARTTLS with it and ' +
        '`ENS_INBOUND_TLS_KEY`. Unset: no STARTTLS',
    }),
    tlsKey: custom('ENS_INBOUND_TLS_KEY', {
      shown: 'unset',
      doc: 'PEM private key file of `ENS_INBOUND_TLS_CERT`',
      transform: (raw, env) => {
        if ((raw === undefined) !== (env.ENS_INBOUND_TLS_CERT === undefined))
          throw new Error('set ENS_INBOUND_TLS_CERT and ENS_INBOUND_TLS_KEY together, or neither');
        return raw;
      },
    }),
  },
  url: optionalText('ENS_URL', {
    pattern: '^https?://[^/]+(/.*)?$',
    shown: 'the running `ens serve`',
    doc:
      'where `ens token` and `ens url` reach the API. Unset: the `ens serve` running on the same ' +
      '`ENS_DATA_DIR` (wherever its `PORT` put it), else `http://HOST:PORT`',
  }),
  publicUrl: optionalText('ENS_PUBLIC_URL', {
    pattern: '^https?://[^/]+(/.*)?$',
    shown: '`http://HOST:PORT`',
    doc:
      "the URL people and providers reach ENS at: the console's redirect URI, Secure cookies " +
      'when https',
  }),
  ops: {
    issuer: optionalText('ENS_OPS_ISSUER', {
      pattern: '^https?://',
      doc:
        'OpenID Connect issuer URL of your identity provider; unset, `/ops/` says the console is ' +
        'not configured',
    }),
    clientId: optionalText('ENS_OPS_CLIENT_ID', {
      doc: "the console's client id at the identity provider (required with `ENS_OPS_ISSUER`)",
    }),
    clientSecret: optionalText('ENS_OPS_CLIENT_SECRET', {
      doc: "the console's client secret (required with `ENS_OPS_ISSUER`)",
    }),
    scopes: text('ENS_OPS_SCOPES', {
      default: 'openid email profile',
      pattern: '(^|\\s)openid(\\s|$)',
      doc: 'scopes asked for at sign-in',
    }),
    groupsClaim: text('ENS_OPS_GROUPS_CLAIM', {
      default: 'groups',
      doc: "the claim that lists a user's groups",
    }),
    superuserGroup: optionalText('ENS_OPS_SUPERUSER_GROUP', {
      doc: 'members of this group are console superusers',
    }),
    superusers: custom('ENS_OPS_SUPERUSERS', {
      shown: 'unset',
      doc: 'comma-separated emails or subjects that are superusers',
      transform: (raw) =>
        Object.freeze(
          (raw ?? '')
            .split(',')
            .map((x) => x.trim().toLowerCase())
            .filter(Boolean),
        ),
    }),
    sessionTtlMs: duration('ENS_OPS_SESSION_TTL', {
      default: '8h',
      doc: 'console session lifetime (server-side)',
    }),
    contact: text('ENS_OPS_CONTACT', {
      default: 'your ENS administrators',
      doc: 'whom people without rights should ask (shown on the notice page)',
    }),
  },
  // OpenTelemetry's own names (see docs/guides/tracing.md); tracing is off unless one of
  // the endpoints is set or OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED or `none` turn it off.
  tracing: {
    sdkDisabled: flag('OTEL_SDK_DISABLED', {
      default: false,
      doc: '`true` turns tracing off, whatever else is set',
    }),
    exporter: custom('OTEL_TRACES_EXPORTER', {
      shown: 'unset',
      pattern: '^(otlp|none)$',
      doc:
        '`otlp` turns tracing on (to `http://localhost:4318/v1/traces` unless an endpoint is ' +
        'set); `none` turns it off. Unset: on when an endpoint is set',
      transform: (raw) => (raw as 'otlp' | 'none' | undefined) ?? null,
    }),
    endpoint: optionalText('OTEL_EXPORTER_OTLP_ENDPOINT', {
      pattern: '^https?://',
      doc:
        'OTLP/HTTP base URL of a collector, e.g. `http://otel-collector:4318`; spans go to its ' +
        '`/v1/traces`. Setting it turns tracing on',
    }),
    tracesEndpoint: optionalText('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', {
      pattern: '^https?://',
      doc:
        'the full URL spans are posted to, used as is (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`). ' +
        'Setting it turns tracing on',
    }),
    protocol: choice('OTEL_EXPORTER_OTLP_PROTOCOL', ['http/protobuf'], {
      default: 'http/protobuf',
      doc: 'only `http/protobuf` is spoken; `grpc` or `http/json` stop the start',
    }),
    tracesProtocol: choice('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', ['http/protobuf'], {
      default: 'http/protobuf',
      doc: 'the same, for traces alone',
    }),
    headers: optionalText('OTEL_EXPORTER_OTLP_HEADERS', {
      pattern: '^\\s*[^=,\\s]+\\s*=[^,]*(,\\s*[^=,\\s]+\\s*=[^,]*)*$',
      doc:
        'headers for every export request, `key=value` pairs comma-separated, values ' +
        'URL-encoded, e.g. `authorization=Bearer%20xyz`',
    }),
    tracesHeaders: optionalText('OTEL_EXPORTER_OTLP_TRACES_HEADERS', {
      pattern: '^\\s*[^=,\\s]+\\s*=[^,]*(,\\s*[^=,\\s]+\\s*=[^,]*)*$',
      doc: 'the same, for traces alone (a header named in both takes this value)',
    }),
    serviceName: text('OTEL_SERVICE_NAME', {
      default: 'ens',
      doc: "the `service.name` ENS's spans carry",
    }),
    scheduleDelayMs: integer('OTEL_BSP_SCHEDULE_DELAY', {
      default: 5000,
      min: 1,
      doc: 'milliseconds between two exports of the spans ended meanwhile',
    }),
  },
  logLevel: choice(
    'ENS_LOG_LEVEL',
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'],
    { default: 'info', doc: 'pino level: `fatal`…`trace`, or `silent`' },
  ),
} as const;

type Declarations = { readonly [k: string]: EnvVar<unknown> | Declarations };

/** What reading a declaration tree gives: each EnvVar replaced by its value. */
export type Values<T> = {
  readonly [K in keyof T]: T[K] extends EnvVar<infer V> ? V : Values<T[K]>;
};

const isVar = (d: EnvVar<unknown> | Declarations): d is EnvVar<unknown> =>
  typeof (d as EnvVar<unknown>).read === 'function';

/** Every declared variable, in declaration order (the table of docs/reference/configuration.md). */
export function allVariables(tree: Declarations = VARIABLES): EnvVar<unknown>[] {
  return Object.values(tree).flatMap((d) => (isVar(d) ? [d] : allVariables(d)));
}

export function readVariables<T extends Declarations>(
  tree: T,
  env: Readonly<Record<string, string | undefined>>,
): Values<T> {
  return Object.fromEntries(
    Object.entries(tree).map(([k, d]) => [k, isVar(d) ? d.read(env) : readVariables(d, env)]),
  ) as Values<T>;
}
