import { promises as dnsPromises, type LookupAddress } from 'node:dns';
import ipaddr from 'ipaddr.js';

/**
 * The outbound-address guard (SSRF): every request ENS makes to an address a client supplied
 * passes it. Today that is callback URLs; it lives in core so that every role that connects to a
 * client's address uses the same rules.
 *
 * Two layers, both required for a safe post:
 * 1. {@link checkOutboundUrl} (sync, cheap): shape of the URL and IP-literal hosts. Fine to run
 *    at request-accept time too, but it MUST be repeated at send time.
 * 2. {@link resolvePublicAddress} (async, at send time): resolves the hostname and refuses if
 *    any address is non-public. The returned address must be the one connected to; resolving
 *    again at connect time would let a DNS answer change in between (DNS rebinding).
 *    `postCallback` in the callbacks role does both and the pinning.
 *
 * `allowPrivate: true` disables only the address checks (for self-hosted installs that call
 * back into their own network, and for tests); scheme, credentials and host are always checked.
 */

export type UrlCheck = { ok: true; url: URL } | { ok: false; detail: string };
export type AddressCheck =
  | { ok: true; address: string; family: 4 | 6 }
  | { ok: false; detail: string };

/**
 * The subset of `dns.promises.lookup` used here, so tests can inject a plain function;
 * `dns.promises.lookup` itself satisfies it.
 */
export type LookupAll = (hostname: string, options: { all: true }) => Promise<LookupAddress[]>;

/**
 * Validates a client-supplied URL. Refuses: unparsable URLs; schemes other than http/https; any
 * username or password in the URL (would be sent as credentials and logged); a missing host;
 * port 0; and, unless `allowPrivate`, `localhost`/`*.localhost` and IP literals that are not
 * public unicast (loopback, RFC 1918, unique-local, link-local, CGNAT, unspecified, multicast,
 * broadcast, reserved/documentation, IPv4-mapped forms of those, ...).
 *
 * Relies on the WHATWG URL parser's normalisation, so obfuscated literals such as
 * `http://0x7f.1/` or `http://2130706433/` are seen as 127.0.0.1.
 *
 * A hostname that passes here can still resolve to a private address; that is
 * {@link resolvePublicAddress}'s job.
 *
 * `detail` is a phrase meant to follow the field name, e.g. `callback_url ${detail}` →
 * "callback_url must not contain credentials (user:password@)".
 */
export function checkOutboundUrl(url: string, opts: { allowPrivate: boolean }): UrlCheck {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, detail: 'is not a valid URL' };
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return {
      ok: false,
      detail: `scheme ${parsed.protocol.replace(/:$/, '')} is not allowed (use http or https)`,
    };
  }
  if (parsed.username !== '' || parsed.password !== '') {
    return { ok: false, detail: 'must not contain credentials (user:password@)' };
  }
  if (parsed.hostname === '') {
    return { ok: false, detail: 'has no host' };
  }
  if (parsed.port === '0') {
    return { ok: false, detail: 'port 0 is not allowed' };
  }
  if (opts.allowPrivate) return { ok: true, url: parsed };

  const refusal = hostRefusal(parsed.hostname);
  return refusal === null ? { ok: true, url: parsed } : { ok: false, detail: refusal };
}

/**
 * Resolves `hostname` (a URL hostname: domain name, IPv4, or bracketed/bare IPv6) to the single
 * address the post must connect to.
 *
 * All addresses are resolved and the answer is refused if ANY of them is not public unicast
 * (unless `allowPrivate`): an attacker controlling DNS could otherwise mix a private address into
 * a mostly public answer. IP literals are classified without a lookup. The first address, in
 * resolver order, is returned.
 *
 * Never rejects; lookup failures come back as `{ ok: false }`. It does not time out on its own
 * (the system resolver has its own timeouts); callers needing a deadline race it.
 */
export async function resolvePublicAddress(
  hostname: string,
  opts: { allowPrivate: boolean; lookup?: LookupAll },
): Promise<AddressCheck> {
  const literal = parseIpLiteral(hostname);
  if (literal !== null) {
    if (!opts.allowPrivate) {
      const reason = addressRefusal(literal);
      if (reason !== null) return { ok: false, detail: `host ${hostname} ${reason}` };
    }
    return { ok: true, address: literal.toString(), family: literal.kind() === 'ipv4' ? 4 : 6 };
  }
  if (!opts.allowPrivate && isLocalhostName(hostname)) {
    return { ok: false, detail: `host ${hostname} is a localhost name` };
  }

  let answers: LookupAddress[];
  try {
    answers = await (opts.lookup
      ? opts.lookup(hostname, { all: true })
      : sharedSystemLookup(hostname));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    return { ok: false, detail: `DNS lookup for ${hostname} failed${code ? `: ${code}` : ''}` };
  }
  if (!Array.isArray(answers) || answers.length === 0) {
    return { ok: false, detail: `DNS lookup for ${hostname} returned no addresses` };
  }

  let first: { address: string; family: 4 | 6 } | undefined;
  for (const answer of answers) {
    let ip: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      ip = ipaddr.parse(answer.address);
    } catch {
      return { ok: false, detail: `DNS lookup for ${hostname} returned an invalid address` };
    }
    if (!opts.allowPrivate) {
      const reason = addressRefusal(ip);
      if (reason !== null) {
        return {
          ok: false,
          detail: `host ${hostname} resolves to ${answer.address}, which ${reason}`,
        };
      }
    }
    // Connect to the address exactly as the resolver gave it; only its classification
    // looks through IPv4-mapped forms.
    first ??= { address: answer.address, family: ip.kind() === 'ipv4' ? 4 : 6 };
  }
  return { ok: true, ...first! };
}

const inFlight = new Map<string, Promise<LookupAddress[]>>();

/**
 * Concurrent posts to one host share a single system lookup. getaddrinfo runs on libuv's small
 * thread pool, so one lookup per post halves throughput under load. Nothing is cached past the
 * lookup's own lifetime, and every caller still checks and pins the shared answer itself.
 */
function sharedSystemLookup(hostname: string): Promise<LookupAddress[]> {
  const key = hostname.toLowerCase();
  let pending = inFlight.get(key);
  if (pending === undefined) {
    pending = dnsPromises.lookup(hostname, { all: true }).finally(() => inFlight.delete(key));
    inFlight.set(key, pending);
  }
  return pending;
}

function hostRefusal(hostname: string): string | null {
  const literal = parseIpLiteral(hostname);
  if (literal !== null) {
    const reason = addressRefusal(literal);
    return reason === null ? null : `host ${hostname} ${reason}`;
  }
  return isLocalhostName(hostname) ? `host ${hostname} is a localhost name` : null;
}

function isLocalhostName(hostname: string): boolean {
  // Resolvers treat a trailing dot as the same name, and RFC 6761 reserves the whole tree.
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  return name === 'localhost' || name.endsWith('.localhost');
}

/**
 * Parses an IP literal as it appears in `URL.hostname` (IPv6 bracketed) or in a DNS answer.
 * IPv4 must be dotted-quad: the URL parser has already canonicalised other forms, and a
 * non-canonical string here is a domain name, not an address.
 */
function parseIpLiteral(host: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (ipaddr.IPv4.isValidFourPartDecimal(bare)) return ipaddr.IPv4.parse(bare);
  if (bare.includes(':') && ipaddr.IPv6.isValid(bare)) return ipaddr.IPv6.parse(bare);
  return null;
}

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

/** Reason an address is not a public destination, or null when it is. */
function addressRefusal(ip: ipaddr.IPv4 | ipaddr.IPv6): string | null {
  // ::ffff:a.b.c.d reaches a.b.c.d on dual-stack sockets, so judge the embedded IPv4.
  const effective =
    ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()
      ? (ip as ipaddr.IPv6).toIPv4Address()
      : ip;
  const range = effective.range();
  if (range !== 'unicast') return `is not a public address (${range})`;
  // ipaddr.js labels everything it has no name for as unicast, including the deprecated
  // IPv4-compatible ::a.b.c.d and other unallocated space; only 2000::/3 is routable.
  if (effective.kind() === 'ipv6' && !(effective as ipaddr.IPv6).match(GLOBAL_UNICAST_V6)) {
    return 'is not a public address (outside 2000::/3)';
  }
  return null;
}
