import { EnsError } from './ens-error.ts';

/**
 * How a provider says a send failed. The worker decides retries from `kind` alone, so plugins
 * never need the worker's code. Classification is by the `ensErrorKind` property, not instanceof,
 * because a third-party plugin may bundle its own copy of this SDK.
 */
export type ProviderErrorKind = 'transient' | 'permanent' | 'rate_limited';

const CODES: Record<ProviderErrorKind, string> = {
  /**
   * A provider's failure worth retrying (a timeout, a 5xx, an error the plugin did not classify):
   * retried on ENS_RETRY_BACKOFF.
   */
  transient: 'ENS_ERR_PROVIDER_TRANSIENT',
  /**
   * A provider's refusal for good: the delivery fails at once, and a refusal about the recipient
   * suppresses the address.
   */
  permanent: 'ENS_ERR_PROVIDER_PERMANENT',
  /**
   * The provider asked ENS to slow down: retried after its hint, or on ENS_RETRY_BACKOFF without
   * one.
   */
  rate_limited: 'ENS_ERR_PROVIDER_RATE_LIMITED',
};

/**
 * Why a refusal is about the recipient rather than the message (since SDK 1.3): ENS fails the
 * delivery as for any permanent error and also adds the address to the suppression list, so later
 * sends to it are not made. `opt_out`: the recipient told the provider to stop (Twilio 21610).
 */
export type RecipientRefusal = 'invalid_recipient' | 'hard_bounce' | 'opt_out';

/**
 * A send failed, as the plugin classifies it; each kind has its own code
 * (ENS_ERR_PROVIDER_TRANSIENT, _PERMANENT, _RATE_LIMITED).
 */
export class ProviderError extends EnsError {
  static override readonly code: string = 'ENS_ERR_PROVIDER';
  readonly ensErrorKind: ProviderErrorKind;
  /** For rate_limited: the provider's hint of when to try again, in ms. */
  readonly retryAfterMs: number | undefined;
  /** push: the device token is dead (uninstalled app, expired subscription); ENS unregisters it. */
  readonly deviceGone: boolean;
  /** The refusal is about the recipient: ENS suppresses the address (since SDK 1.3). */
  readonly recipientRefusal: RecipientRefusal | undefined;
  /**
   * The recipient refused only this kind of message (WhatsApp 131050: marketing): the suppression
   * covers its event type alone.
   */
  readonly recipientEventTypeOnly: boolean;

  constructor(
    kind: ProviderErrorKind,
    message: string,
    opts: {
      retryAfterMs?: number;
      cause?: unknown;
      deviceGone?: boolean;
      recipientRefusal?: RecipientRefusal;
      recipientEventTypeOnly?: boolean;
    } = {},
  ) {
    super(message, { code: CODES[kind], cause: opts.cause });
    this.ensErrorKind = kind;
    this.retryAfterMs = opts.retryAfterMs;
    this.deviceGone = opts.deviceGone ?? false;
    this.recipientRefusal = opts.recipientRefusal;
    this.recipientEventTypeOnly = opts.recipientEventTypeOnly === true;
  }
}

/** The provider or the network failed in a way worth retrying (timeouts, 5xx). */
export const transientError = (message: string, cause?: unknown): ProviderError =>
  new ProviderError('transient', message, { cause });

/** The provider refused for good (bad number, unknown template); `message` becomes last_error. */
export const permanentError = (message: string, cause?: unknown): ProviderError =>
  new ProviderError('permanent', message, { cause });

/** The provider asked us to slow down; retried after retryAfterMs (or the back-off when absent). */
export const rateLimitedError = (
  message: string,
  retryAfterMs?: number,
  cause?: unknown,
): ProviderError => new ProviderError('rate_limited', message, { retryAfterMs, cause });

/**
 * push: the provider says this device token no longer exists; a permanent failure for that device.
 */
export const deviceGoneError = (message: string, cause?: unknown): ProviderError =>
  new ProviderError('permanent', message, { cause, deviceGone: true });

/**
 * The provider refused the recipient for good (SMTP 5.1.1 at RCPT, Twilio 21211/21614, an SMSC's
 * invalid destination, "not a WhatsApp user"): a permanent failure, and the address is suppressed
 * with `reason` (since SDK 1.3). `eventTypeOnly`: the recipient refused only this kind of message
 * (WhatsApp 131050, marketing stopped), so the entry covers the delivery's event type alone.
 */
export const recipientError = (
  message: string,
  reason: RecipientRefusal = 'invalid_recipient',
  cause?: unknown,
  opts: { eventTypeOnly?: boolean } = {},
): ProviderError =>
  new ProviderError('permanent', message, {
    cause,
    recipientRefusal: reason,
    recipientEventTypeOnly: opts.eventTypeOnly,
  });

const REFUSALS: readonly RecipientRefusal[] = ['invalid_recipient', 'hard_bounce', 'opt_out'];

/**
 * Reads the classification off any thrown value. Anything unclassified is transient: an
 * unexpected exception must never turn into a silent permanent failure.
 */
export interface ErrorClass {
  kind: ProviderErrorKind;
  message: string;
  retryAfterMs: number | undefined;
  deviceGone: boolean;
  /** Set on a permanent refusal that is about the recipient. */
  recipientRefusal: RecipientRefusal | undefined;
  /** With recipientRefusal: the entry covers the delivery's event type alone. */
  recipientEventTypeOnly: boolean;
}

export function classifyError(e: unknown): ErrorClass {
  if (e !== null && typeof e === 'object' && 'ensErrorKind' in e) {
    const pe = e as ProviderError;
    if (
      pe.ensErrorKind === 'transient' ||
      pe.ensErrorKind === 'permanent' ||
      pe.ensErrorKind === 'rate_limited'
    ) {
      const retryAfterMs =
        typeof pe.retryAfterMs === 'number' && Number.isFinite(pe.retryAfterMs)
          ? pe.retryAfterMs
          : undefined;
      const recipientRefusal =
        pe.ensErrorKind === 'permanent' &&
        REFUSALS.includes(pe.recipientRefusal as RecipientRefusal)
          ? pe.recipientRefusal
          : undefined;
      const recipientEventTypeOnly =
        recipientRefusal !== undefined && pe.recipientEventTypeOnly === true;
      return {
        kind: pe.ensErrorKind,
        message: String(pe.message),
        retryAfterMs,
        deviceGone: pe.deviceGone === true,
        recipientRefusal,
        recipientEventTypeOnly,
      };
    }
  }
  return {
    kind: 'transient',
    message: e instanceof Error ? e.message : String(e),
    retryAfterMs: undefined,
    deviceGone: false,
    recipientRefusal: undefined,
    recipientEventTypeOnly: false,
  };
}
