/*
 * PostgreSQL not reachable, as opposed to a query that is wrong: the connection was refused, cut,
 * timed out, or the server is starting, stopping or out of connections. The API answers these with
 * 503 and Retry-After (the request can be repeated with its Idempotency-Key), never 500.
 */

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
/**
 * SQLSTATE classes 08 (connection exception) and 57P0x (the server shutting down or starting),
 * 53300 (too many connections), 25P03 (the session ended for idling in a transaction: this process
 * was paused; see openRuntime).
 */
const SQLSTATE = /^(08\d{3}|57P0[1-4]|53300|25P03)$/;
/** What node-postgres says when a connection dies under it or none frees up in time. */
const DRIVER_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|connect ECONNREFUSED/i;

/** No host of a multi-host DATABASE_URL suits now (target-session.ts): a failover under way. */
const NO_SUITABLE_HOST = 'ENS_ERR_DB_NO_SUITABLE_HOST';

export function isDatabaseUnavailable(err: unknown): boolean {
  for (
    let e = err as { code?: unknown; message?: unknown; cause?: unknown } | null | undefined,
      depth = 0;
    e && depth < 5;
    e = e.cause as typeof e, depth++
  ) {
    if (
      typeof e.code === 'string' &&
      (NETWORK_CODES.has(e.code) || SQLSTATE.test(e.code) || e.code === NO_SUITABLE_HOST)
    )
      return true;
    if (typeof e.message === 'string' && DRIVER_MESSAGES.test(e.message)) return true;
  }
  return false;
}
