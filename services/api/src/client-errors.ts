import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { Errors } from '@ens/core';

/** How long a refused client has to take its answer before its socket is destroyed regardless. */
const CLOSE_GRACE_MS = 1_000;

/**
 * Requests Node's HTTP parser refuses before Fastify sees them (headers or a URL over 16 KB,
 * malformed request lines): answered like every other refusal, a 4xx with a `detail`, instead of
 * the parser's bare status.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  // The codes and details are the registry's; a request that timed out keeps its own status, 408.
  const [status, e] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, Errors.headersTooLarge()]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, Errors.badRequest('The request was not received in time.')]
        : [400, Errors.badRequest('The request is not valid HTTP.')];
  const body = JSON.stringify({ code: e.code, detail: e.detail });
  // Ended, then destroyed: the server's sockets stay half-open after end(), so a client that never
  // read nor closed (a slow-headers attack) kept its connection, timed out, for as long as it
  // liked.
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    () => socket.destroy(),
  );
  setTimeout(() => socket.destroy(), CLOSE_GRACE_MS).unref();
}
