import { ConfigError } from './config-error.ts';
import { placeholderError } from './env-var.ts';
import { readVariables, VARIABLES, type Values } from './variables.ts';

export { ConfigError };

type Read = Values<typeof VARIABLES>;

/** Where inline images are kept: a directory under dataDir, or an S3-compatible bucket. */
export type MediaConfig =
  | { readonly kind: 'directory' }
  | ({ readonly kind: 's3'; readonly bucket: string } & Pick<
      Read['media'],
      'region' | 'endpoint' | 'forcePathStyle' | 'prefix'
    >);

/** The /ops/ console's sign-in: its variables, with the three it needs made required. */
export type OpsConfig = Omit<
  Read['ops'],
  'issuer' | 'clientId' | 'clientSecret' | 'superuserGroup'
> & {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Members of this group are superusers; null: no group grants it. */
  readonly superuserGroup: string | null;
};

/**
 * The configuration every process reads once at start-up: each field is one variable declared in
 * variables.ts (its meaning is there), except the three composed from several.
 */
export type Config = Omit<Read, 'media' | 'ops' | 'publicUrl'> & {
  readonly media: MediaConfig;
  /** null when ENS_OPS_ISSUER is unset (the console then says so). */
  readonly ops: OpsConfig | null;
  /** ENS_PUBLIC_URL, or http://HOST:PORT; no trailing slash. */
  readonly publicUrl: string;
};

const OPS_REQUIRED = ['ENS_OPS_ISSUER', 'ENS_OPS_CLIENT_ID', 'ENS_OPS_CLIENT_SECRET'] as const;
const OPS_OPTIONAL = [
  'ENS_OPS_SCOPES',
  'ENS_OPS_GROUPS_CLAIM',
  'ENS_OPS_SUPERUSER_GROUP',
  'ENS_OPS_SUPERUSERS',
  'ENS_OPS_SESSION_TTL',
  'ENS_OPS_CONTACT',
] as const;
const S3_VARS = [
  'ENS_S3_BUCKET',
  'ENS_S3_REGION',
  'ENS_S3_ENDPOINT',
  'ENS_S3_FORCE_PATH_STYLE',
  'ENS_S3_PREFIX',
] as const;

function opsConfig(o: Read['ops'], env: Record<string, string>): OpsConfig | null {
  const set = OPS_REQUIRED.filter((k) => env[k] !== undefined);
  if (set.length === 0) {
    const stray = OPS_OPTIONAL.find((k) => env[k] !== undefined);
    if (stray)
      throw new ConfigError(
        `${stray}: is set, but ENS_OPS_ISSUER, ENS_OPS_CLIENT_ID and ENS_OPS_CLIENT_SECRET are not (the console needs all three)`,
      );
    return null;
  }
  if (set.length < OPS_REQUIRED.length) {
    const missing = OPS_REQUIRED.find((k) => env[k] === undefined)!;
    throw new ConfigError(
      `${missing}: required when ${set[0]} is set (the console's sign-in needs the issuer, client id and client secret)`,
    );
  }
  return Object.freeze({
    ...o,
    issuer: o.issuer!,
    clientId: o.clientId!,
    clientSecret: o.clientSecret!,
    superuserGroup: o.superuserGroup ?? null,
  });
}

function mediaConfig(m: Read['media'], env: Record<string, string>): MediaConfig {
  if (m.store !== 's3') {
    const stray = S3_VARS.find((k) => env[k] !== undefined);
    if (stray)
      throw new ConfigError(
        `${stray}: is set, but ENS_MEDIA_STORE is not s3 (set ENS_MEDIA_STORE=s3 to keep images in S3)`,
      );
    return { kind: 'directory' };
  }
  if (m.bucket === undefined)
    throw new ConfigError('ENS_S3_BUCKET: required when ENS_MEDIA_STORE=s3');
  return Object.freeze({
    kind: 's3' as const,
    bucket: m.bucket,
    region: m.region,
    endpoint: m.endpoint,
    forcePathStyle: m.forcePathStyle,
    prefix: m.prefix,
  });
}

/** Said when the master key cannot open the stored callback secrets (see ClientStore). */
export const MASTER_KEY_MISMATCH =
  'this master key cannot open the callback secrets in the database; give every ens process ' +
  'the same ENS_MASTER_KEY (or the same ENS_DATA_DIR when it is unset)';

/** Reads and validates the environment once. Throws ConfigError naming the first bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable counts as unset, as a shell's `FOO= ens serve` means.
  const given: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== '') given[k] = v;
  // Read by the AWS SDK, not by ENS, but given in the same Secret template: checked here too.
  for (const name of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
    const placeholder = placeholderError(name, given[name]);
    if (placeholder) throw placeholder;
  }
  const { media, ops, publicUrl, ...rest } = readVariables(VARIABLES, given);
  // A key kept longer than its handoff would answer a replay with a 202 for a handoff that is gone.
  if (rest.retentionMs < rest.idempotencyTtlMs) {
    throw new ConfigError(
      'ENS_RETENTION: must be at least ENS_IDEMPOTENCY_TTL (an Idempotency-Key must not ' +
        'outlive the handoff it replays)',
    );
  }
  // Beaten once a second: a shorter timeout would declare a live process dead at its first slow
  // beat.
  if (rest.sessionTimeoutMs < 2_000) {
    throw new ConfigError(
      'ENS_SESSION_TIMEOUT: must be at least 2s (a process beats its heartbeat once a second)',
    );
  }
  // Node checks the headers' deadline against the request's: one shorter than the other is ignored.
  if (rest.httpRequestTimeoutMs < rest.httpHeadersTimeoutMs) {
    throw new ConfigError(
      'ENS_HTTP_REQUEST_TIMEOUT: must be at least ENS_HTTP_HEADERS_TIMEOUT (the headers are ' +
        'part of the request)',
    );
  }
  return Object.freeze({
    ...rest,
    media: mediaConfig(media, given),
    ops: opsConfig(ops, given),
    publicUrl: (publicUrl ?? `http://${rest.host}:${rest.port}`).replace(/\/+$/, ''),
  });
}
