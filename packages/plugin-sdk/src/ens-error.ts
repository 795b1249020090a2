/**
 * The root of ENS's one error tree. Every error ENS defines, in every workspace and in the
 * bundled plugins, is an EnsError: it has a stable `code` (tests and callers branch on it, never
 * on the wording), a `detail` a person can act on, and a `cause`. It lives here, in the package
 * every other one may import (third-party plugins included), so the tree has one root.
 *
 *   EnsError
 *   ├─ OperatorError ……… the operator must fix it: `ens` prints the one line and exits 2
 *   │   ├─ PluginLoadError (ENS_ERR_PLUGIN) ……… a plugin or its settings (here)
 *   │   ├─ ConfigError (ENS_ERR_CONFIG) ……… an environment variable (@ens/core)
 *   │   ├─ EngineMissingError (ENS_ERR_ENGINE_MISSING) ……… nats-server or PostgreSQL not installed (@ens/local-engines)
 *   │   └─ UsageError (ENS_ERR_USAGE) ……… the command line (apps/ens)
 *   ├─ ProviderError (ENS_ERR_PROVIDER_TRANSIENT | _PERMANENT | _RATE_LIMITED) ……… a send failed (here)
 *   ├─ HttpError (ENS_ERR_*, and RFC 6749's codes) ……… an API answer, with its status (@ens/core `Errors`)
 *   └─ the errors of one module, each with its code: EngineStartError, OutboundRefusedError,
 *      S3MediaStoreError, MediaNotFoundError, SlotsClosedError, ChainSendError, SignInFailed, …
 *
 * The API's error handler (services/api/src/error-handler.ts) is the one place an error becomes an
 * HTTP answer: an HttpError gives its own status, anything else a 500 that is logged.
 */
export class EnsError extends Error {
  /** The code of every instance of this class; subclasses set their own, as jose's errors do. */
  static readonly code: string = 'ENS_ERR';
  readonly code: string;

  constructor(detail: string, opts: { code?: string; cause?: unknown } = {}) {
    super(detail, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = opts.code ?? (new.target as unknown as { code: string }).code;
  }

  /** What a person reads: the message, by another name that says so. */
  get detail(): string {
    return this.message;
  }
}

/** An error only the operator can mend (configuration, installation, the command line). */
export class OperatorError extends EnsError {
  static override readonly code: string = 'ENS_ERR_OPERATOR';
}

/** True for an error `ens` reports as one line and exit 2. */
export function isOperatorError(e: unknown): e is OperatorError {
  return e instanceof OperatorError;
}
