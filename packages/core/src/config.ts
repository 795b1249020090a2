import path from 'node:path';
import { Type, type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { parseBackoff, parseDuration } from './durations.ts';

/**
 * Every environment variable ENS reads, in one schema. The README's configuration table lists the
 * same names; `loadConfig` parses them once at start-up so a bad value stops the process with a
 * message naming the variable, never later in the middle of a send.
 */
const Env = Type.Object({
  PORT: Type.Optional(Type.String({ pattern: '^\\d{1,5}$' })),
  HOST: Type.Optional(Type.String({ minLength: 1 })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  NATS_URL: Type.Optional(Type.String({ minLength: 1 })),
  ENS_NATS_REPLICAS: Type.Optional(Type.String({ pattern: '^[1-5]$' })),
  ENS_DATA_DIR: Type.Optional(Type.String({ minLength: 1 })),
  ENS_MASTER_KEY: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9+/=_-]{43,}$' })),
  ENS_TOKEN_TTL: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_RETRY_BACKOFF: Type.Optional(Type.String()),
  ENS_CALLBACK_BACKOFF: Type.Optional(Type.String()),
  ENS_CALLBACK_TIMEOUT: Type.Optional(Type.String()),
  ENS_ALLOW_PRIVATE_CALLBACKS: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  ENS_IDEMPOTENCY_TTL: Type.Optional(Type.String()),
  ENS_MAX_RECIPIENTS: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_MAX_BODY_BYTES: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_MAX_IMAGE_BYTES: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_RATE_LIMIT: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_DAILY_QUOTA: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_TOKEN_RATE_LIMIT: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_WORKER_CONCURRENCY: Type.Optional(Type.String({ pattern: '^\\d+$' })),
  ENS_PROVIDER_CONFIG: Type.Optional(Type.String({ pattern: '^\\s*\\{' })),
  ENS_LEASE: Type.Optional(Type.String()),
  ENS_SWEEP_GRACE: Type.Optional(Type.String()),
  ENS_PROVIDERS: Type.Optional(Type.String({ pattern: '^\\s*(sms|email|push|whatsapp)=[^,]+(,\\s*(sms|email|push|whatsapp)=[^,]+)*\\s*$' })),
  ENS_FAILOVER_THRESHOLD: Type.Optional(Type.String({ pattern: '^[1-9]\\d*$' })),
  ENS_FAILOVER_COOLDOWN: Type.Optional(Type.String()),
  ENS_MEDIA_STORE: Type.Optional(Type.Union([Type.Literal('directory'), Type.Literal('s3')])),
  ENS_S3_BUCKET: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' })),
  ENS_S3_REGION: Type.Optional(Type.String({ minLength: 1 })),
  ENS_S3_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://' })),
  ENS_S3_FORCE_PATH_STYLE: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  ENS_S3_PREFIX: Type.Optional(Type.String({ pattern: '^[^/].*$' })),
  ENS_PUBLIC_URL: Type.Optional(Type.String({ pattern: '^https?://[^/]+(/.*)?$' })),
  ENS_OPS_ISSUER: Type.Optional(Type.String({ pattern: '^https?://' })),
  ENS_OPS_CLIENT_ID: Type.Optional(Type.String({ minLength: 1 })),
  ENS_OPS_CLIENT_SECRET: Type.Optional(Type.String({ minLength: 1 })),
  ENS_OPS_SCOPES: Type.Optional(Type.String({ pattern: '(^|\\s)openid(\\s|$)' })),
  ENS_OPS_GROUPS_CLAIM: Type.Optional(Type.String({ minLength: 1 })),
  ENS_OPS_SUPERUSER_GROUP: Type.Optional(Type.String({ minLength: 1 })),
  ENS_OPS_SUPERUSERS: Type.Optional(Type.String({ minLength: 1 })),
  ENS_OPS_SESSION_TTL: Type.Optional(Type.String()),
  ENS_OPS_CONTACT: Type.Optional(Type.String({ minLength: 1 })),
  ENS_LOG_LEVEL: Type.Optional(
    Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l))),
  ),
});
type EnvInput = Static<typeof Env>;
const checkEnv = Compile(Env);

export interface Config {
  readonly port: number;
  readonly host: string;
  /** Unset: `ens serve` starts its own PostgreSQL under dataDir. */
  readonly databaseUrl: string | undefined;
  /** Unset: `ens serve` starts its own nats-server under dataDir. */
  readonly natsUrl: string | undefined;
  /** Copies JetStream keeps of each stream ENS declares; 3 on a three-node cluster. */
  readonly natsReplicas: number;
  readonly dataDir: string;
  /** Unset: a key is generated once and kept in `<dataDir>/master.key`. */
  readonly masterKey: string | undefined;
  readonly tokenTtlSeconds: number;
  readonly retryBackoffMs: readonly number[];
  readonly callbackBackoffMs: readonly number[];
  readonly callbackTimeoutMs: number;
  readonly allowPrivateCallbacks: boolean;
  readonly idempotencyTtlMs: number;
  readonly maxRecipients: number;
  readonly maxBodyBytes: number;
  readonly maxImageBytes: number;
  /** Requests per second per client on /v2/ unless the client has its own limit. */
  readonly rateLimit: number;
  /** Messages per channel per UTC day per client unless the client has its own; 0 = unlimited. */
  readonly dailyQuota: number;
  /** Token requests per minute per client id and per address. */
  readonly tokenRateLimit: number;
  readonly workerConcurrency: number;
  /**
   * Provider plugin packages per channel, in order of preference: the first healthy one sends.
   * Channels not named use the sandbox.
   */
  readonly providers: Readonly<Record<'sms' | 'email' | 'push' | 'whatsapp', readonly string[]>>;
  /** Transient failures in a row that take a provider out of a channel's list for a while. */
  readonly failoverThreshold: number;
  /** How long a provider stays out before one trial send decides whether it is back. */
  readonly failoverCooldownMs: number;
  /** Where inline images are kept: a directory under dataDir, or an S3-compatible bucket. */
  readonly media: { readonly kind: 'directory' } | {
    readonly kind: 's3';
    readonly bucket: string;
    readonly region: string;
    readonly endpoint: string | undefined;
    readonly forcePathStyle: boolean;
    readonly prefix: string;
  };
  /** Configuration per plugin package name, from ENS_PROVIDER_CONFIG (a JSON object). */
  readonly providerConfig: Readonly<Record<string, unknown>>;
  /** How long a worker holds a delivery (or callback) for one attempt before others may take it. */
  readonly leaseMs: number;
  /** How long past due a pending delivery or callback waits before the sweeper re-enqueues it. */
  readonly sweepGraceMs: number;
  /** The URL users and providers reach this service at (redirect URI, webhook URLs, Secure cookies). */
  readonly publicUrl: string;
  /** The /ops/ console's sign-in; null when ENS_OPS_ISSUER is unset (the console then says so). */
  readonly ops: OpsConfig | null;
  readonly logLevel: string;
}

export interface OpsConfig {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly scopes: string;
  /** The ID-token / userinfo claim that lists the user's groups. */
  readonly groupsClaim: string;
  /** Members of this group are superusers; null: no group grants it. */
  readonly superuserGroup: string | null;
  /** Emails or subjects that are superusers (lower-cased). */
  readonly superusers: readonly string[];
  readonly sessionTtlMs: number;
  /** Whom a signed-in user without rights should ask (shown on the notice page). */
  readonly contact: string;
}

function opsConfig(e: EnvInput): OpsConfig | null {
  const set = (['ENS_OPS_ISSUER', 'ENS_OPS_CLIENT_ID', 'ENS_OPS_CLIENT_SECRET'] as const).filter((k) => e[k] !== undefined);
  if (set.length === 0) {
    const stray = (['ENS_OPS_SCOPES', 'ENS_OPS_GROUPS_CLAIM', 'ENS_OPS_SUPERUSER_GROUP', 'ENS_OPS_SUPERUSERS', 'ENS_OPS_SESSION_TTL', 'ENS_OPS_CONTACT'] as const).find((k) => e[k] !== undefined);
    if (stray) throw new ConfigError(`${stray}: is set, but ENS_OPS_ISSUER, ENS_OPS_CLIENT_ID and ENS_OPS_CLIENT_SECRET are not (the console needs all three)`);
    return null;
  }
  if (set.length < 3) {
    const missing = (['ENS_OPS_ISSUER', 'ENS_OPS_CLIENT_ID', 'ENS_OPS_CLIENT_SECRET'] as const).find((k) => e[k] === undefined)!;
    throw new ConfigError(`${missing}: required when ${set[0]} is set (the console's sign-in needs the issuer, client id and client secret)`);
  }
  return Object.freeze({
    issuer: e.ENS_OPS_ISSUER!,
    clientId: e.ENS_OPS_CLIENT_ID!,
    clientSecret: e.ENS_OPS_CLIENT_SECRET!,
    scopes: e.ENS_OPS_SCOPES ?? 'openid email profile',
    groupsClaim: e.ENS_OPS_GROUPS_CLAIM ?? 'groups',
    superuserGroup: e.ENS_OPS_SUPERUSER_GROUP ?? null,
    superusers: Object.freeze((e.ENS_OPS_SUPERUSERS ?? '').split(',').map((x) => x.trim().toLowerCase()).filter(Boolean)),
    sessionTtlMs: durationVar('ENS_OPS_SESSION_TTL', e.ENS_OPS_SESSION_TTL, '8h'),
    contact: e.ENS_OPS_CONTACT ?? 'your ENS administrators',
  });
}

function parseJsonObject(name: string, v: string | undefined): Record<string, unknown> {
  if (v === undefined) return {};
  try {
    const o = JSON.parse(v) as unknown;
    if (o !== null && typeof o === 'object' && !Array.isArray(o)) return o as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new ConfigError(`${name}: must be a JSON object keyed by plugin package name, such as {"@ens/plugin-sandbox": {"handsetDelayMs": 400}}`);
}

const PACKAGE_NAME = /^(@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/;

/** `sms=@ens/plugin-twilio|@ens/plugin-smpp,email=@ens/plugin-smtp`: `|` separates fail-over choices. */
function parseProviders(v: string | undefined): Config['providers'] {
  const sandbox = ['@ens/plugin-sandbox'];
  const out: Record<string, readonly string[]> = { sms: sandbox, email: sandbox, push: sandbox, whatsapp: sandbox };
  const seen = new Set<string>();
  for (const pair of (v ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
    const [channel, list] = pair.split('=') as [string, string];
    if (seen.has(channel)) throw new ConfigError(`ENS_PROVIDERS: ${channel} is named twice; list its providers once, separated by |`);
    seen.add(channel);
    const pkgs = list.split('|').map((p) => p.trim());
    const bad = pkgs.find((p) => !PACKAGE_NAME.test(p));
    if (bad !== undefined) throw new ConfigError(`ENS_PROVIDERS: ${channel}=${list}: "${bad}" is not an npm package name`);
    if (new Set(pkgs).size !== pkgs.length) throw new ConfigError(`ENS_PROVIDERS: ${channel} lists a provider twice`);
    out[channel] = Object.freeze(pkgs);
  }
  return Object.freeze(out) as Config['providers'];
}

function mediaConfig(e: EnvInput): Config['media'] {
  const s3Vars = (['ENS_S3_BUCKET', 'ENS_S3_REGION', 'ENS_S3_ENDPOINT', 'ENS_S3_FORCE_PATH_STYLE', 'ENS_S3_PREFIX'] as const).filter((k) => e[k] !== undefined);
  if (e.ENS_MEDIA_STORE !== 's3') {
    if (s3Vars.length > 0) throw new ConfigError(`${s3Vars[0]}: is set, but ENS_MEDIA_STORE is not s3 (set ENS_MEDIA_STORE=s3 to keep images in S3)`);
    return { kind: 'directory' };
  }
  if (e.ENS_S3_BUCKET === undefined) throw new ConfigError('ENS_S3_BUCKET: required when ENS_MEDIA_STORE=s3');
  return Object.freeze({
    kind: 's3' as const,
    bucket: e.ENS_S3_BUCKET,
    region: e.ENS_S3_REGION ?? 'us-east-1',
    endpoint: e.ENS_S3_ENDPOINT,
    forcePathStyle: e.ENS_S3_FORCE_PATH_STYLE === 'true',
    prefix: e.ENS_S3_PREFIX ?? '',
  });
}

/** Said when the master key cannot open the stored callback secrets (see ClientStore). */
export const MASTER_KEY_MISMATCH =
  'this master key cannot open the callback secrets in the database; give every ens process the same ENS_MASTER_KEY (or the same ENS_DATA_DIR when it is unset)';

export class ConfigError extends Error {
  readonly code = 'ENS_ERR_CONFIG';
  override readonly name = 'ConfigError';
}

function int(v: string | undefined, fallback: number): number {
  return v === undefined ? fallback : Number.parseInt(v, 10);
}

function durationVar(name: string, v: string | undefined, fallback: string): number {
  try {
    return parseDuration(v ?? fallback);
  } catch (e) {
    throw new ConfigError(`${name}: ${(e as Error).message}`);
  }
}

function backoffVar(name: string, v: string | undefined, fallback: string): number[] {
  try {
    const list = parseBackoff(v ?? fallback);
    if (list.length === 0) throw new Error('needs at least one delay');
    return list;
  } catch (e) {
    throw new ConfigError(`${name}: ${(e as Error).message}`);
  }
}

/** Reads and validates the environment once. Throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const input: Record<string, string> = {};
  for (const key of Object.keys(Env.properties)) {
    const v = env[key];
    if (v !== undefined && v !== '') input[key] = v;
  }
  if (!checkEnv.Check(input)) {
    const first = checkEnv.Errors(input)[0];
    const name = first?.instancePath.replace(/^\//, '') || 'environment';
    throw new ConfigError(`${name}: invalid value ${JSON.stringify(input[name] ?? '')} (${first?.message ?? 'invalid'})`);
  }
  const e = input as EnvInput;
  const port = int(e.PORT, 8080);
  if (port > 65535) throw new ConfigError(`PORT: ${port} is not a TCP port`);
  return Object.freeze({
    port,
    host: e.HOST ?? '127.0.0.1',
    databaseUrl: e.DATABASE_URL,
    natsUrl: e.NATS_URL,
    natsReplicas: int(e.ENS_NATS_REPLICAS, 1),
    dataDir: path.resolve(e.ENS_DATA_DIR ?? './.ens'),
    masterKey: e.ENS_MASTER_KEY,
    tokenTtlSeconds: int(e.ENS_TOKEN_TTL, 3600),
    retryBackoffMs: Object.freeze(backoffVar('ENS_RETRY_BACKOFF', e.ENS_RETRY_BACKOFF, '1s,10s,1m,10m,1h')),
    callbackBackoffMs: Object.freeze(backoffVar('ENS_CALLBACK_BACKOFF', e.ENS_CALLBACK_BACKOFF, '1s,10s,1m,10m,1h')),
    callbackTimeoutMs: durationVar('ENS_CALLBACK_TIMEOUT', e.ENS_CALLBACK_TIMEOUT, '10s'),
    allowPrivateCallbacks: e.ENS_ALLOW_PRIVATE_CALLBACKS === 'true',
    idempotencyTtlMs: durationVar('ENS_IDEMPOTENCY_TTL', e.ENS_IDEMPOTENCY_TTL, '24h'),
    maxRecipients: int(e.ENS_MAX_RECIPIENTS, 10_000),
    maxBodyBytes: int(e.ENS_MAX_BODY_BYTES, 20 * 1024 * 1024),
    maxImageBytes: int(e.ENS_MAX_IMAGE_BYTES, 5 * 1024 * 1024),
    rateLimit: int(e.ENS_RATE_LIMIT, 200),
    dailyQuota: int(e.ENS_DAILY_QUOTA, 0),
    tokenRateLimit: int(e.ENS_TOKEN_RATE_LIMIT, 60),
    workerConcurrency: int(e.ENS_WORKER_CONCURRENCY, 64),
    providers: parseProviders(e.ENS_PROVIDERS),
    failoverThreshold: int(e.ENS_FAILOVER_THRESHOLD, 5),
    failoverCooldownMs: durationVar('ENS_FAILOVER_COOLDOWN', e.ENS_FAILOVER_COOLDOWN, '30s'),
    media: mediaConfig(e),
    providerConfig: Object.freeze(parseJsonObject('ENS_PROVIDER_CONFIG', e.ENS_PROVIDER_CONFIG)),
    leaseMs: durationVar('ENS_LEASE', e.ENS_LEASE, '60s'),
    sweepGraceMs: durationVar('ENS_SWEEP_GRACE', e.ENS_SWEEP_GRACE, '30s'),
    publicUrl: (e.ENS_PUBLIC_URL ?? `http://${e.HOST ?? '127.0.0.1'}:${port}`).replace(/\/+$/, ''),
    ops: opsConfig(e),
    logLevel: e.ENS_LOG_LEVEL ?? 'info',
  });
}
