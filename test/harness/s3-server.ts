import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Teardown } from './service.ts';

/*
 * A local S3-compatible server for tests: s3rver (a real S3 REST implementation storing objects in
 * a directory) with two things added in front of it.
 *
 * - SigV4 verification. s3rver 3.7.1 parses an AWS4-HMAC-SHA256 Authorization header but never
 *   checks the signature ("Signature version 4 calculation is unimplemeneted" in its
 *   lib/middleware/authentication.js): any secret is accepted as long as the access key id is
 *   known. So a wrong secret would pass here and fail against AWS. The check below follows
 *   https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html and answers as S3
 *   does (403 SignatureDoesNotMatch; 400 AuthorizationHeaderMalformed with x-amz-bucket-region for
 *   a wrong region). The payload hash is taken as declared (x-amz-content-sha256), not recomputed.
 * - Fault knobs, so a test can make the next requests answer an S3 error (500 InternalError,
 *   503 SlowDown…) without stopping the server.
 *
 * Also found while checking s3rver against @aws-sdk/client-s3 3.x:
 * - Path style: s3rver takes the bucket from the path when the Host is an IP or "localhost". The
 *   SDK switches to path style by itself for an IP endpoint; for a host name endpoint
 *   (http://localhost:port) it builds media.localhost unless forcePathStyle is set.
 * - s3rver does not decode aws-chunked bodies: a PutObject whose Body is a stream is sent by the
 *   SDK as STREAMING-UNSIGNED-PAYLOAD-TRAILER and stored with its chunk framing. A Buffer body is
 *   sent plain with its CRC32 in a header, which s3rver ignores.
 */

type Next = () => Promise<void>;

/** The slice of a Koa context the middleware below uses (s3rver ships no types). */
interface KoaContext {
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  status: number;
  type: string;
  body: unknown;
  set(field: Record<string, string>): void;
}

interface S3rver {
  middleware: ((ctx: KoaContext, next: Next) => Promise<void>)[];
  httpServer?: Server;
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
}

type S3rverConstructor = new (options: {
  address: string;
  port: number;
  silent: boolean;
  directory: string;
  configureBuckets: { name: string }[];
}) => S3rver;

const require = createRequire(import.meta.url);

/** An S3 error answer, as S3 writes it: `<Error><Code>…</Code><Message>…</Message></Error>`. */
export interface S3Fault {
  status: number;
  code: string;
  message: string;
  headers?: Record<string, string>;
}

export interface S3Request {
  method: string;
  /** Path and query exactly as received, e.g. `/media/ab/sha256-…?x-id=GetObject`. */
  url: string;
  status: number;
}

export interface TestS3Server {
  /** http://127.0.0.1:<port>; path-style addressing works with or without forcePathStyle. */
  endpoint: string;
  region: string;
  /** The pre-created bucket. */
  bucket: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** Every request answered, in order (those the fault knob answered too). */
  requests: S3Request[];
  /** The next `count` requests get `fault` instead of reaching the store. */
  failNext(count: number, fault: S3Fault): void;
  stop(): Promise<void>;
}

export interface S3ServerOptions {
  bucket?: string;
  /** The region signatures must be scoped to; others get AuthorizationHeaderMalformed. */
  region?: string;
}

// s3rver's one built-in account; other key ids are answered InvalidAccessKeyId by s3rver itself.
const ACCESS_KEY_ID = 'S3RVER';
const SECRET_ACCESS_KEY = 'S3RVER';

/** Starts s3rver on 127.0.0.1 on a free port, in a fresh directory, with one bucket. */
export async function startS3Server(
  t: Teardown,
  opts: S3ServerOptions = {},
): Promise<TestS3Server> {
  const bucket = opts.bucket ?? 'ens-media';
  const region = opts.region ?? 'us-east-1';
  const directory = await mkdtemp(join(tmpdir(), 'ens-s3-'));
  const S3rverClass = require('s3rver') as S3rverConstructor;
  const server = new S3rverClass({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });

  const requests: S3Request[] = [];
  const faults: S3Fault[] = [];
  // Koa composes its middleware list when the server starts listening, so this runs before
  // s3rver's own routing and authentication.
  server.middleware.unshift(async (ctx, next) => {
    const url = ctx.req.url ?? '/';
    ctx.res.on('finish', () =>
      requests.push({ method: ctx.method, url, status: ctx.res.statusCode }),
    );
    const fault = faults.shift() ?? checkSignature(ctx.req, region);
    if (fault) return answer(ctx, fault);
    await next();
  });

  const address = await server.run();
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= (async () => {
      const closing = server.close();
      server.httpServer?.closeAllConnections();
      await closing;
      await rm(directory, { recursive: true, force: true });
    })();
    return stopped;
  };
  t.teardown(stop);
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    region,
    bucket,
    credentials: { accessKeyId: ACCESS_KEY_ID, secretAccessKey: SECRET_ACCESS_KEY },
    requests,
    failNext(count, fault) {
      for (let i = 0; i < count; i++) faults.push(fault);
    },
    stop,
  };
}

function answer(ctx: KoaContext, fault: S3Fault): void {
  ctx.status = fault.status;
  ctx.set({ 'x-amz-request-id': 'S3TEST', ...fault.headers });
  ctx.type = 'application/xml';
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${xml(fault.code)}</Code><Message>${xml(fault.message)}</Message><RequestId>S3TEST</RequestId></Error>`;
}

function xml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

/**
 * Verifies a header-signed SigV4 request; undefined when it is genuine or not signed this way
 * (anonymous, SigV2 and presigned requests are left to s3rver).
 */
function checkSignature(req: IncomingMessage, serverRegion: string): S3Fault | undefined {
  const auth = req.headers.authorization;
  if (!auth?.startsWith('AWS4-HMAC-SHA256 ')) return undefined;
  const m = AUTH.exec(auth);
  if (!m)
    return {
      status: 400,
      code: 'AuthorizationHeaderMalformed',
      message: 'The authorization header is malformed.',
    };
  const [, accessKeyId, date, region, signedHeaders, signature] = m as unknown as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  if (accessKeyId !== ACCESS_KEY_ID) return undefined;
  if (region !== serverRegion) {
    return {
      status: 400,
      code: 'AuthorizationHeaderMalformed',
      message: `The authorization header is malformed; the region '${region}' is wrong; expecting '${serverRegion}'`,
      headers: { 'x-amz-bucket-region': serverRegion },
    };
  }
  const amzDate = header(req, 'x-amz-date');
  const names = signedHeaders.split(';');
  const mismatch: S3Fault = {
    status: 403,
    code: 'SignatureDoesNotMatch',
    message:
      'The request signature we calculated does not match the signature you provided. Check ' +
      'your key and signing method.',
  };
  if (!amzDate.startsWith(date) || !names.includes('host')) return mismatch;

  const [path = '/', query = ''] = (req.url ?? '/').split('?', 2);
  const canonicalRequest = [
    req.method,
    path,
    canonicalQuery(query),
    names.map((n) => `${n}:${header(req, n).trim().replace(/\s+/g, ' ')}\n`).join(''),
    signedHeaders,
    header(req, 'x-amz-content-sha256') || 'UNSIGNED-PAYLOAD',
  ].join('\n');
  const scope = `${date}/${region}/s3/aws4_request`;
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonicalRequest).digest('hex'),
  ].join('\n');
  let key = hmac(`AWS4${SECRET_ACCESS_KEY}`, date);
  for (const part of [region, 's3', 'aws4_request']) key = hmac(key, part);
  const expected = hmac(key, stringToSign);
  return timingSafeEqual(expected, Buffer.from(signature, 'hex')) ? undefined : mismatch;
}

function header(req: IncomingMessage, name: string): string {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : (v ?? '');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data, 'utf8').digest();
}

/** Pairs decoded, re-encoded the RFC 3986 way, sorted by name then value. */
function canonicalQuery(query: string): string {
  if (!query) return '';
  return query
    .split('&')
    .map((pair) => {
      const i = pair.indexOf('=');
      const [k, v] = i < 0 ? [pair, ''] : [pair.slice(0, i), pair.slice(i + 1)];
      return [rfc3986(decodeURIComponent(k)), rfc3986(decodeURIComponent(v))] as const;
    })
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/**
 * Puts the server's credentials where the AWS SDK's default chain finds them (as production ENS
 * reads them), for the rest of the test; the previous values come back at teardown.
 */
export function useS3Credentials(t: Teardown, s3: TestS3Server): void {
  const saved = {
    AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY,
  };
  process.env.AWS_ACCESS_KEY_ID = s3.credentials.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = s3.credentials.secretAccessKey;
  t.teardown(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
}
