/*
 * Request lines (ENS_LOG_LEVEL=debug, and every 5xx) carry the URL, and some URLs carry a secret in
 * their query: Meta's webhook check sends `hub.verify_token`, the identity provider sends the
 * console its sign-in `code`, and a caller may put its token in `?access_token=` (which ENS
 * refuses, but the line was written first). Log collectors keep lines longer and show them to more
 * people than the secrets' owners would, so those values never reach a line: the logger's `url`
 * serializer (createLogger) passes every logged URL through redactUrl.
 */

/**
 * The query parameters whose values are secrets, compared without case: the one list. A parameter
 * named here is written as `name=[redacted]`; its presence still shows, which is what a reader of
 * the log needs.
 */
export const SECRET_QUERY_PARAMS: readonly string[] = [
  'access_token',
  'refresh_token',
  'id_token',
  'token',
  'code',
  'state',
  'client_secret',
  'password',
  'secret',
  'api_key',
  'apikey',
  'key',
  'signature',
  'sig',
  'hub.verify_token',
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
];

const SECRET = new Set(SECRET_QUERY_PARAMS.map((p) => p.toLowerCase()));
export const REDACTED = '[redacted]';

function decoded(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}

/**
 * A URL or request target (`/path?query`) with the values of SECRET_QUERY_PARAMS replaced by
 * `[redacted]`. The rest is kept byte for byte, so a line still shows what was asked; a name
 * percent-encoded to hide it (`hub%2Everify_token`) is decoded before the comparison.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const hash = url.indexOf('#', q);
  const query = url.slice(q + 1, hash < 0 ? undefined : hash);
  const kept = query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      return SECRET.has(decoded(name).toLowerCase()) && eq >= 0 ? `${name}=${REDACTED}` : pair;
    })
    .join('&');
  return `${url.slice(0, q + 1)}${kept}${hash < 0 ? '' : url.slice(hash)}`;
}

/** pino serializers that keep secrets out of every line that logs a `url` or a request. */
export const logSerializers = {
  url: (v: unknown): unknown =>
    typeof v === 'string' ? redactUrl(v) : v instanceof URL ? redactUrl(v.href) : v,
  req: (v: unknown): unknown => {
    if (v === null || typeof v !== 'object') return v;
    const r = v as { method?: unknown; url?: unknown; id?: unknown };
    return {
      id: r.id,
      method: r.method,
      url: typeof r.url === 'string' ? redactUrl(r.url) : undefined,
    };
  },
};
