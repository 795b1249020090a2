/*
 * libpq's connection URI, as psql, pgx, JDBC and postgres.js read it, including the multi-host form
 * a platform team's PostgreSQL hands out (Patroni, CloudNativePG, pg_auto_failover, a managed
 * service): `postgres://user:pw@h1:5432,h2:5433/ens?target_session_attrs=read-write`. node-postgres
 * reads one host only (a second one is an "Invalid URL"), so the hosts and target_session_attrs
 * are taken out here, and node-postgres gets the rest as a one-host URL to parse as it always has.
 * The rules are libpq's (https://www.postgresql.org/docs/current/libpq-connect.html): a port per
 * host, or one port for all; `host` and `port` in the query override the URI's; an empty host or
 * port is the default.
 */

/** The values of libpq's `target_session_attrs`, with its meanings (see TargetSession). */
export const TARGET_SESSION_ATTRS = [
  'any',
  'read-write',
  'read-only',
  'primary',
  'standby',
  'prefer-standby',
] as const;
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

/** One server of the list: a name or address, or a Unix socket directory (starting with `/`). */
export interface PostgresHost {
  readonly host: string;
  readonly port: number;
}

export interface LibpqUrl {
  /** In the URL's order, which is the order libpq tries them in; at least one. */
  readonly hosts: readonly PostgresHost[];
  readonly targetSessionAttrs: TargetSessionAttrs;
  /**
   * For node-postgres: the URL itself when it names one host and no target_session_attrs (so such
   * a URL reaches the driver untouched), else the same URL with only the first host and without
   * the parameters handled here.
   */
  readonly url: string;
}

const SCHEME = /^postgres(?:ql)?:\/\//i;
const DEFAULT_HOST = 'localhost';
const DEFAULT_PORT = 5432;
/** Taken out of the query: node-postgres would read `host` and `port` as one server's. */
const HANDLED = ['host', 'port', 'target_session_attrs'];

/**
 * Parses a `postgres://` or `postgresql://` URL in libpq's form. Throws an Error that says what is
 * wrong (never echoing the password) for a port that is not a number, a count of ports that fits
 * neither one nor every host, or an unknown target_session_attrs.
 */
export function parseLibpqUrl(url: string): LibpqUrl {
  const scheme = SCHEME.exec(url)?.[0];
  if (!scheme) throw new Error('not a postgres:// or postgresql:// URL');
  const rest = url.slice(scheme.length);
  // The host list ends at the path or the query; a password must percent-encode '/', '?' and '@'.
  const authorityEnd = rest.search(/[/?]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  const tail = authorityEnd < 0 ? '' : rest.slice(authorityEnd);
  const at = authority.lastIndexOf('@');
  const userinfo = authority.slice(0, at + 1);
  const hostspec = authority.slice(at + 1);
  const queryAt = tail.indexOf('?');
  const path = queryAt < 0 ? tail : tail.slice(0, queryAt);
  const query = new URLSearchParams(queryAt < 0 ? '' : tail.slice(queryAt + 1));

  const inUri = hostspec === '' ? [] : hostspec.split(',').map(splitHostPort);
  const names = query.has('host') ? query.get('host')!.split(',') : inUri.map((h) => h.host);
  const ports = query.has('port') ? query.get('port')!.split(',') : inUri.map((h) => h.port);
  if (names.length === 0) names.push('');
  if (ports.length > 1 && ports.length !== names.length)
    throw new Error(
      `${ports.length} ports for ${names.length} hosts: give one port, or one per host`,
    );
  const hosts = names.map((name, i) => ({
    host: name === '' ? DEFAULT_HOST : decodeURIComponent(name),
    port: portOf(ports.length === 1 ? ports[0]! : (ports[i] ?? '')),
  }));

  const attrs = query.get('target_session_attrs') ?? 'any';
  if (!(TARGET_SESSION_ATTRS as readonly string[]).includes(attrs))
    throw new Error(
      `target_session_attrs=${attrs} is not one of ${TARGET_SESSION_ATTRS.join(', ')}`,
    );
  const targetSessionAttrs = attrs as TargetSessionAttrs;
  if (hosts.length === 1 && !query.has('target_session_attrs'))
    return { hosts, targetSessionAttrs, url };

  for (const name of HANDLED) query.delete(name);
  const first = hosts[0]!;
  // A socket directory cannot stand in the authority; node-postgres reads it from `host=`.
  const socket = first.host.startsWith('/');
  if (socket) query.set('host', first.host);
  const authorityHost = socket
    ? ''
    : `${first.host.includes(':') ? `[${first.host}]` : encodeURIComponent(first.host)}:${first.port}`;
  if (socket) query.set('port', String(first.port));
  const search = query.toString();
  return {
    hosts,
    targetSessionAttrs,
    url: `${scheme}${userinfo}${authorityHost}${path}${search ? `?${search}` : ''}`,
  };
}

/** `h`, `h:5432`, `[::1]`, `[::1]:5432` → host and port text (either may be empty). */
function splitHostPort(spec: string): { host: string; port: string } {
  if (spec.startsWith('[')) {
    const close = spec.indexOf(']');
    if (close < 0) throw new Error(`an IPv6 address without its closing bracket: ${spec}`);
    const after = spec.slice(close + 1);
    if (after !== '' && !after.startsWith(':'))
      throw new Error(`unexpected text after an IPv6 address: ${spec}`);
    return { host: spec.slice(1, close), port: after.slice(1) };
  }
  const colon = spec.indexOf(':');
  return colon < 0
    ? { host: spec, port: '' }
    : { host: spec.slice(0, colon), port: spec.slice(colon + 1) };
}

function portOf(text: string): number {
  if (text === '') return DEFAULT_PORT;
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port >= 1 && port <= 65_535)) throw new Error(`port ${JSON.stringify(text)} is not a port`);
  return port;
}

/**
 * The target_session_attrs ENS's pools use for `u`. Every pool of ENS writes, so a session that
 * takes no writes is of no use to it: with several hosts and no target_session_attrs (or `any`,
 * under which libpq takes the first host that answers, a standby too) it is `read-write`, and the
 * values that ask for a standby or a read-only session are refused (an Error saying so).
 */
export function writerTarget(u: LibpqUrl): TargetSessionAttrs {
  const t = u.targetSessionAttrs;
  if (t === 'standby' || t === 'read-only' || t === 'prefer-standby')
    throw new Error(
      `target_session_attrs=${t} asks for a session that takes no writes, and ENS writes through every connection: use read-write (or primary), or leave it out`,
    );
  return t === 'any' && u.hosts.length > 1 ? 'read-write' : t;
}
