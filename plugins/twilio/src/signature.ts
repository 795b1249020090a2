import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * X-Twilio-Signature, as https://www.twilio.com/docs/usage/webhooks/webhooks-security describes:
 * base64(HMAC-SHA1(authToken, url + every POST parameter sorted by name, as name + value)).
 * A repeated name contributes each of its distinct values in sorted order, as Twilio's own
 * helper libraries do.
 */
export function twilioSignature(
  authToken: string,
  url: string,
  params: ReadonlyMap<string, readonly string[]>,
): string {
  let data = url;
  for (const name of [...params.keys()].sort()) {
    for (const value of [...new Set(params.get(name))].sort()) data += name + value;
  }
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

/** Form parameters of an application/x-www-form-urlencoded body, every value of each name kept. */
export function formParams(rawBody: Buffer): Map<string, string[]> {
  const params = new Map<string, string[]>();
  for (const [k, v] of new URLSearchParams(rawBody.toString('utf8'))) {
    const list = params.get(k);
    if (list) list.push(v);
    else params.set(k, [v]);
  }
  return params;
}

/**
 * Twilio signs some URLs with the scheme's default port written out (https://host:443/…) and some
 * without it; its helper libraries accept the URL with the port and without it, and so do we.
 */
function urlForms(url: string): string[] {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return [url];
  }
  const userinfo = u.username ? `${u.username}${u.password ? `:${u.password}` : ''}@` : '';
  const rest = `${u.pathname}${u.search}${u.hash}`;
  // WHATWG URL drops a default port, so an empty port means "the scheme's default".
  const port =
    u.port !== '' ? u.port : u.protocol === 'https:' ? '443' : u.protocol === 'http:' ? '80' : '';
  const forms = new Set<string>([url, `${u.protocol}//${userinfo}${u.hostname}${rest}`]);
  if (port) forms.add(`${u.protocol}//${userinfo}${u.hostname}:${port}${rest}`);
  return [...forms];
}

function sameSignature(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  // A signature's length is public (28 base64 characters); only its content must not leak by
  // timing.
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * True when `header` is Twilio's signature of this request for `url` (with or without its port).
 */
export function verifyTwilioSignature(
  authToken: string,
  header: string | undefined,
  url: string,
  params: ReadonlyMap<string, readonly string[]>,
): boolean {
  if (!header) return false;
  let ok = false;
  // Every form is computed and compared, so the time taken does not say which form was tried.
  for (const form of urlForms(url))
    ok = sameSignature(header, twilioSignature(authToken, form, params)) || ok;
  return ok;
}

/** Twilio's answer when a request's signature does not match. */
export const FORBIDDEN = {
  status: 403,
  body: 'Twilio request validation failed',
  headers: { 'content-type': 'text/plain' },
} as const;

/**
 * The form parameters of a request Twilio signed for `url`, or null (logged, naming `what`) when
 * X-Twilio-Signature does not match; the caller then answers FORBIDDEN.
 */
export function signedParams(
  req: { headers: Record<string, string | string[] | undefined>; rawBody: Buffer },
  authToken: string,
  url: string,
  logger: { warn(obj: object, msg?: string): void },
  what: string,
): Map<string, string[]> | null {
  const header = req.headers['x-twilio-signature'];
  const signature = Array.isArray(header) ? header[0] : header;
  const params = formParams(req.rawBody);
  if (verifyTwilioSignature(authToken, signature, url, params)) return params;
  logger.warn(
    { url, signed: signature !== undefined },
    `twilio ${what} refused: X-Twilio-Signature does not match`,
  );
  return null;
}
