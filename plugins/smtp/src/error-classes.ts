import {
  permanentError,
  rateLimitedError,
  recipientError,
  transientError,
  type ProviderError,
  type RecipientRefusal,
} from '@ens/plugin-sdk';

/** The fields nodemailer puts on the errors it hands back (see its NodemailerError). */
interface SmtpFailure {
  message?: string;
  name?: string;
  code?: string;
  originalCode?: string;
  response?: string;
  responseCode?: number;
  command?: string;
  timeoutType?: string;
}

/**
 * Replies that say the relay does not accept *us* (credentials, TLS before AUTH), not that it
 * refuses the message: 530 authentication required / STARTTLS first, 534 mechanism too weak,
 * 535 credentials invalid, 538 encryption required. A configuration fault the operator fixes,
 * so transient: it counts toward failover and the message is retried, not lost.
 */
const AUTH_REPLY_CODES = new Set([530, 534, 535, 538]);

/**
 * SMTP has no rate-limit reply code; relays say it in the text of a 4xx: Amazon SES "454
 * Throttling failure: Maximum sending rate exceeded", Microsoft 365 "421 4.7.0 … too many
 * connections", SendGrid/Mailgun "421 … rate limit". None gives a retry-after, so the back-off
 * decides when.
 */
const THROTTLED =
  /throttl|rate[ -]?limit|sending rate|too many (?:messages|connections|requests|emails)|quota exceeded/i;

/**
 * RFC 3463 enhanced status codes that, in a 5xx reply to RCPT TO, say the address itself is bad,
 * not the message or the sender: ENS then suppresses it (SDK 1.3 recipientError). 5.1.1 bad
 * destination mailbox and 5.1.10 null MX (RFC 7505: the domain takes no mail) are hard bounces;
 * 5.1.2 bad destination system (no such domain) and 5.1.3 bad address syntax are invalid
 * recipients. Other 5xx (5.7.1 relay or policy refusals, 5.2.x mailbox states) fail the delivery
 * without suppressing: they may be about this message or this sender.
 */
const RECIPIENT_REFUSALS: ReadonlyMap<string, RecipientRefusal> = new Map([
  ['5.1.1', 'hard_bounce'],
  ['5.1.10', 'hard_bounce'],
  ['5.1.2', 'invalid_recipient'],
  ['5.1.3', 'invalid_recipient'],
]);

/**
 * The enhanced status code at the start of a reply's first line (`550 5.1.1 …` or `550-5.1.1 …`).
 */
function enhancedStatus(response: string): string | undefined {
  return /^\d{3}[ -]([245]\.\d{1,3}\.\d{1,3})(?:\s|$)/.exec(response.trimStart())?.[1];
}

/**
 * Commands whose reply is about the message or its recipient; anything earlier is about the
 * session.
 */
const TRANSACTION_COMMANDS = new Set(['MAIL FROM', 'RCPT TO', 'DATA']);

/**
 * One line of the relay's reply: multi-line replies ("550-5.1.1 …\n550 5.1.1 …") are joined
 * with the code repeated only once, so last_error reads like the reply a human would quote.
 */
export function replyText(response: string): string {
  const lines = response
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0);
  const [first = '', ...rest] = lines;
  const joined = [
    first.replace(/^(\d{3})-/, '$1 '),
    ...rest.map((l) => l.replace(/^\d{3}[ -](?:\d\.\d{1,3}\.\d{1,3} )?/, '')),
  ].join(' ');
  const oneLine = joined.replace(/\s+/g, ' ');
  return oneLine.length > 1_000 ? `${oneLine.slice(0, 997)}...` : oneLine;
}

/**
 * Turns whatever sending or verifying threw into a ProviderError, from the SMTP reply code and
 * the phase it came in (nodemailer's err.command):
 *   - 421 anywhere, and any 4xx: transient (RFC 5321 4.2.1: the same command may succeed later);
 *     rate-limited when the text says the relay is throttling (see THROTTLED).
 *   - 530/534/535/538 and EAUTH/ENOAUTH: transient, a configuration fault (see AUTH_REPLY_CODES).
 *   - 5xx to MAIL FROM, RCPT TO or DATA: permanent, with the relay's reply as the reason; a
 *     5xx to RCPT TO with 5.1.1, 5.1.10, 5.1.2 or 5.1.3 is a recipient refusal (RECIPIENT_REFUSALS).
 *     Except 503 (bad sequence: a session fault, not a verdict on the message) and 552 to
 *     RCPT TO, which RFC 5321 4.5.3.1.10 says clients should treat as 452 (too many recipients).
 *   - 5xx to the greeting, EHLO or STARTTLS: transient; the relay refuses the session, not
 *     this message, and a permanent verdict would fail every message while it lasts.
 *   - no reply at all (refused, reset, timeout, TLS failure): transient.
 */
export function classifySmtpError(
  e: unknown,
  opts: { sendTimeoutMs?: number } = {},
): ProviderError {
  if (e !== null && typeof e === 'object' && 'ensErrorKind' in e) return e as ProviderError;
  const err: SmtpFailure =
    e !== null && typeof e === 'object' ? (e as SmtpFailure) : { message: String(e) };
  const code = err.code ?? '';
  const reply =
    typeof err.response === 'string' && err.response.length > 0
      ? replyText(err.response)
      : undefined;
  const rc = typeof err.responseCode === 'number' ? err.responseCode : undefined;
  const command = err.command ?? '';
  const tlsHint = /CERT|SIGNATURE|SELF_SIGNED|ISSUER|ALTNAME/.test(err.originalCode ?? '')
    ? " (the relay's certificate did not verify: trust its CA with tls.ca, or name it with " +
      'tls.servername)'
    : code === 'ETLS' || command === 'STARTTLS'
      ? ' (requireTLS is on and the relay does not offer a working STARTTLS; set requireTLS ' +
        'false only for a relay without TLS)'
      : '';

  if (code === 'EABORT' || err.name === 'AbortError') {
    return transientError(
      `smtp: the relay did not finish the send within sendTimeoutMs (${opts.sendTimeoutMs ?? '?'} ms)`,
      e,
    );
  }
  if (code === 'EAUTH' || code === 'ENOAUTH' || (rc !== undefined && AUTH_REPLY_CODES.has(rc))) {
    const what = reply ? `smtp ${reply}` : `smtp: ${err.message ?? 'authentication failed'}`;
    return transientError(
      `${what} (the relay refused or requires authentication: check the plugin's auth.user and auth.pass)`,
      e,
    );
  }
  if (rc !== undefined && reply !== undefined) {
    const inTransaction = TRANSACTION_COMMANDS.has(command);
    if (
      rc >= 500 &&
      rc < 600 &&
      rc !== 503 &&
      inTransaction &&
      !(rc === 552 && command === 'RCPT TO')
    ) {
      const refusal =
        command === 'RCPT TO'
          ? RECIPIENT_REFUSALS.get(enhancedStatus(err.response!) ?? '')
          : undefined;
      return refusal
        ? recipientError(`smtp ${reply}`, refusal, e)
        : permanentError(`smtp ${reply}`, e);
    }
    if (rc >= 400 && rc < 500 && THROTTLED.test(reply))
      return rateLimitedError(`smtp ${reply}`, undefined, e);
    const during = inTransaction
      ? ''
      : ` (during ${command === 'CONN' ? 'the greeting' : command || 'the session'})`;
    return transientError(`smtp ${reply}${during}${tlsHint}`, e);
  }
  // nodemailer's own checks before anything reached the relay: a recipient or sender address it
  // cannot put on the envelope, or a message over the SIZE the relay advertised. Retrying the
  // same message would fail the same way.
  if (code === 'EENVELOPE' || (code === 'EMESSAGE' && command === 'MAIL FROM')) {
    return permanentError(`smtp: ${err.message ?? code}`, e);
  }
  const origin =
    err.originalCode && err.originalCode !== code ? `${code}/${err.originalCode}` : code;
  const label = origin ? `${origin}: ` : '';
  if (code === 'ETIMEDOUT') {
    const which = err.timeoutType ? `${err.timeoutType}: ` : '';
    return transientError(
      `smtp: ETIMEDOUT: ${err.message ?? 'timeout'} (${which}no answer from the relay within timeoutMs)`,
      e,
    );
  }
  // ECONNECTION, ESOCKET (ECONNREFUSED, ECONNRESET…), EDNS, EPROTOCOL and the unexpected.
  return transientError(`smtp: ${label}${err.message ?? String(e)}${tlsHint}`, e);
}
