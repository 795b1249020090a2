import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

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
  const [status, detail] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'The request line and headers are larger than 16 KB; send long values in the body.']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'The request was not received in time.']
        : [400, 'The request is not valid HTTP.'];
  const body = JSON.stringify({ code: status === 431 ? 'ENS_ERR_HEADERS_TOO_LARGE' : 'ENS_ERR_BAD_REQUEST', detail });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
