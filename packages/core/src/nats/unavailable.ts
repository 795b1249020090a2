/*
 * NATS not reachable, or JetStream not able to answer yet (a server restarting, a cluster without
 * a leader), as opposed to a request that is wrong. Start-up waits these out.
 */
const NAMES = new Set([
  'ConnectionError',
  'TimeoutError',
  'NoRespondersError',
  'ClosedConnectionError',
]);
const MESSAGES =
  /connection refused|CONNECTION_REFUSED|no responders|timeout|disconnect|JetStream (system )?(is )?(temporarily )?(not )?(un)?available|insufficient resources|no suitable peers/i;

export function isNatsUnavailable(err: unknown): boolean {
  for (
    let e = err as { name?: unknown; message?: unknown; cause?: unknown } | null | undefined,
      depth = 0;
    e && depth < 5;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.name === 'string' && NAMES.has(e.name)) return true;
    if (typeof e.message === 'string' && MESSAGES.test(e.message)) return true;
  }
  return false;
}
