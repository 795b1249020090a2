import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  type ListObjectsV2CommandOutput,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { MEDIA_KEY, mediaKey, type MediaStore, type StoredMedia } from './media-store.ts';
import { EnsError } from '@ens/plugin-sdk';

export interface S3MediaStoreOptions {
  bucket: string;
  region: string;
  /** An S3-compatible service (MinIO, Ceph, R2…); unset means AWS S3 of `region`. */
  endpoint?: string;
  /** Bucket in the path instead of the host name; most S3-compatible services need it. */
  forcePathStyle?: boolean;
  /** Where under the bucket the objects go, e.g. `ens/media`. */
  prefix?: string;
  /**
   * Unset: the AWS SDK's default chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profile, instance
   * role…).
   */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Per attempt, for connecting and for the whole answer; the SDK retries on top. Default 10 s. */
  timeoutMs?: number;
}

/**
 * The key is not in the bucket. `code` is 'ENOENT', as on the error the directory store lets
 * through for a missing file, so a caller tells "no such media" apart the same way on both.
 */
export class MediaNotFoundError extends EnsError {
  static override readonly code: string = 'ENOENT';

  constructor(
    readonly key: string,
    where: string,
  ) {
    super(`media not found: ${key} (${where})`);
  }
}

/** S3 answered with an error, or could not be reached. The message names bucket and object. */
export class S3MediaStoreError extends EnsError {
  static override readonly code: string = 'ENS_ERR_MEDIA_STORE';
  constructor(
    message: string,
    readonly bucket: string,
    readonly objectKey: string | undefined,
    /** S3's error code (AccessDenied, NoSuchBucket…) or the network error code (ECONNREFUSED…). */
    readonly s3Code: string | undefined,
    readonly httpStatus: number | undefined,
    cause?: unknown,
  ) {
    super(message, { cause });
  }
}

/** What the SDK's errors carry; read loosely because network errors have none of the S3 fields. */
interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string | undefined> };
}

/** What S3 means by a status when it sends no error body (HEAD requests). */
const BODILESS_CODES: Record<number, string> = {
  301: 'PermanentRedirect',
  400: 'BadRequest',
  403: 'AccessDenied',
  404: 'NotFound',
};

/**
 * Content-addressed objects in one bucket, laid out like the directory store
 * (`<prefix><first two hex digits>/sha256-<hex>`), so a key means the same bytes on both backends
 * and moving from one to the other is a copy of files to objects (with the `.type` file becoming
 * the object's Content-Type).
 */
export class S3MediaStore implements MediaStore {
  readonly bucket: string;
  private readonly region: string;
  private readonly prefix: string;
  private readonly client: S3Client;
  private readonly where: string;

  constructor(opts: S3MediaStoreOptions) {
    this.bucket = opts.bucket;
    this.region = opts.region;
    const prefix = (opts.prefix ?? '').replace(/^\/+|\/+$/g, '');
    this.prefix = prefix ? `${prefix}/` : '';
    const timeoutMs = opts.timeoutMs ?? 10_000;
    this.client = new S3Client({
      region: opts.region,
      ...(opts.endpoint === undefined ? {} : { endpoint: opts.endpoint }),
      forcePathStyle: opts.forcePathStyle ?? false,
      ...(opts.credentials === undefined ? {} : { credentials: opts.credentials }),
      // The SDK waits forever by default; a hung endpoint must not hold an accept or a send.
      requestHandler: {
        connectionTimeout: timeoutMs,
        requestTimeout: timeoutMs,
        throwOnRequestTimeout: true,
      },
    });
    this.where = opts.endpoint === undefined ? `region ${opts.region}` : opts.endpoint;
  }

  async put(bytes: Buffer, mediaType: string, key = mediaKey(bytes)): Promise<string> {
    const objectKey = this.objectKey(key);
    // A HEAD costs about a twelfth of a PUT, sends no bytes, and the same image (a logo in every
    // message of a campaign, a retried request) is the common case. A PUT of what is there would
    // also add a version in a versioned bucket and fire its event notifications again.
    if (await this.exists(objectKey)) return key;
    try {
      // A Buffer, not a stream: a stream is sent aws-chunked, which not every S3-compatible
      // service decodes.
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: objectKey,
          Body: bytes,
          ContentType: mediaType,
        }),
      );
    } catch (e) {
      throw this.failure('PutObject', objectKey, e);
    }
    return key;
  }

  async get(key: string): Promise<{ bytes: Buffer; mediaType: string }> {
    const objectKey = this.objectKey(key);
    let bytes: Buffer;
    let mediaType: string | undefined;
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: objectKey }),
      );
      if (!out.Body) throw new Error('the answer has no body');
      const body = await out.Body.transformToByteArray();
      bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
      mediaType = out.ContentType;
    } catch (e) {
      if ((e as SdkError).name === 'NoSuchKey')
        throw new MediaNotFoundError(key, `s3://${this.bucket}/${objectKey} at ${this.where}`);
      throw this.failure('GetObject', objectKey, e);
    }
    // The key is the hash of the bytes: checking it costs little and catches an object written
    // by something else under our prefix.
    if (mediaKey(bytes) !== key) {
      throw new S3MediaStoreError(
        `S3 GetObject s3://${this.bucket}/${objectKey} at ${this.where}: the object's bytes do not match its key`,
        this.bucket,
        objectKey,
        undefined,
        undefined,
      );
    }
    return { bytes, mediaType: mediaType ?? 'application/octet-stream' };
  }

  /** Every object under the prefix whose name is a media key, a page of 1,000 at a time. */
  async *list(): AsyncIterable<StoredMedia> {
    let token: string | undefined;
    do {
      let page: ListObjectsV2CommandOutput;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.prefix || undefined,
            ContinuationToken: token,
          }),
        );
      } catch (e) {
        throw this.failure('ListObjectsV2', undefined, e);
      }
      for (const o of page.Contents ?? []) {
        const key = o.Key?.slice(o.Key.lastIndexOf('/') + 1);
        if (
          key !== undefined &&
          MEDIA_KEY.test(key) &&
          o.Key === this.objectKey(key) &&
          o.LastModified
        )
          yield { key, modifiedAt: o.LastModified };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async delete(key: string): Promise<void> {
    const objectKey = this.objectKey(key);
    try {
      // S3 answers 204 whether or not the object was there.
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }));
    } catch (e) {
      throw this.failure('DeleteObject', objectKey, e);
    }
  }

  /** Resolves when the bucket answers to these credentials (HeadBucket; needs s3:ListBucket). */
  async check(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (e) {
      throw this.failure('HeadBucket', undefined, e);
    }
  }

  /** Closes the client's pooled connections. */
  close(): void {
    this.client.destroy();
  }

  private objectKey(key: string): string {
    if (!MEDIA_KEY.test(key)) throw new Error(`not a media key: ${key}`);
    return `${this.prefix}${key.slice(7, 9)}/${key}`;
  }

  private async exists(objectKey: string): Promise<boolean> {
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey }));
      return true;
    } catch (e) {
      const status = (e as SdkError).$metadata?.httpStatusCode;
      // S3 answers 403, not 404, for a missing object when the credentials lack s3:ListBucket;
      // the PUT then says whether writing is allowed.
      if (status === 404 || status === 403) return false;
      throw this.failure('HeadObject', objectKey, e);
    }
  }

  private failure(operation: string, objectKey: string | undefined, e: unknown): S3MediaStoreError {
    const err = (e ?? {}) as SdkError;
    const status = err.$metadata?.httpStatusCode;
    const target = `s3://${this.bucket}${objectKey === undefined ? '' : `/${objectKey}`} at ${this.where}`;
    let code: string | undefined;
    let reason: string;
    if (status === undefined) {
      // Never reached S3: connection refused, DNS, timeout, no credentials.
      code = err.code ?? err.name;
      reason = err.message ?? String(e);
    } else if (!err.message || err.message === 'UnknownError') {
      // An answer to HEAD has no body, so the SDK has no S3 error code to report, only the status.
      code = operation === 'HeadBucket' && status === 404 ? 'NoSuchBucket' : BODILESS_CODES[status];
      reason = code ? `${code} (HTTP ${status})` : `HTTP ${status}`;
    } else {
      code = err.name;
      reason = `${code} (HTTP ${status}): ${err.message}`;
    }
    const bucketRegion = err.$response?.headers?.['x-amz-bucket-region'];
    if (bucketRegion && bucketRegion !== this.region)
      reason += `; the bucket is in region ${bucketRegion}`;
    return new S3MediaStoreError(
      `S3 ${operation} ${target} failed: ${reason}`,
      this.bucket,
      objectKey,
      code,
      status,
      e,
    );
  }
}
