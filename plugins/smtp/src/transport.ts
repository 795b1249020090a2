import { createPrivateKey } from 'node:crypto';
import nodemailer, { type SMTPPoolOptions, type Transporter } from 'nodemailer';
import {
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_PORT,
  DEFAULT_TIMEOUT_MS,
  type SmtpConfig,
} from './config.ts';

/**
 * The header fields a DKIM signature covers: nodemailer's default list (RFC 6376 section 5.4.1's
 * suggestions, List-Unsubscribe among them) plus List-Unsubscribe-Post, which RFC 8058 section 4
 * requires to be signed too; nodemailer's list lacks it. Only the fields a message has are signed.
 */
export const DKIM_SIGNED_FIELDS = [
  'From',
  'Sender',
  'Reply-To',
  'Subject',
  'Date',
  'Message-ID',
  'To',
  'Cc',
  'MIME-Version',
  'Content-Type',
  'Content-Transfer-Encoding',
  'Content-ID',
  'Content-Description',
  'Resent-Date',
  'Resent-From',
  'Resent-Sender',
  'Resent-To',
  'Resent-Cc',
  'Resent-Message-ID',
  'In-Reply-To',
  'References',
  'List-Id',
  'List-Help',
  'List-Unsubscribe',
  'List-Unsubscribe-Post',
  'List-Subscribe',
  'List-Post',
  'List-Owner',
  'List-Archive',
  'OTP-Token',
].join(':');

/**
 * The nodemailer transport options for a configuration. Every default the schema fills in is
 * applied here too, so a caller that hands create() an unvalidated config gets the same relay.
 */
export function transportOptions(config: SmtpConfig): SMTPPoolOptions {
  const timeout = config.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const secure = config.secure ?? false;
  const tls = config.tls ?? {};
  return {
    host: config.host,
    port: config.port ?? DEFAULT_PORT,
    secure,
    // requireTLS means nothing over implicit TLS; with STARTTLS it refuses a relay that does not
    // offer the upgrade (or an attacker who strips it from the EHLO reply) instead of going on in
    // clear.
    requireTLS: !secure && (config.requireTLS ?? true),
    ...(config.auth ? { auth: { user: config.auth.user, pass: config.auth.pass } } : {}),
    tls: {
      rejectUnauthorized: tls.rejectUnauthorized ?? true,
      ...(tls.ca ? { ca: tls.ca } : {}),
      ...(tls.servername ? { servername: tls.servername } : {}),
    },
    ...(config.heloName ? { name: config.heloName } : {}),
    ...(config.dkim
      ? {
          dkim: {
            domainName: config.dkim.domainName,
            keySelector: config.dkim.keySelector,
            privateKey: config.dkim.privateKey,
            headerFieldNames: DKIM_SIGNED_FIELDS,
          },
        }
      : {}),
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
    maxConnections: config.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
    // Messages are built from buffers only; nothing a caller writes may make the worker read a
    // local file or fetch a URL into a message.
    disableFileAccess: true,
    disableUrlAccess: true,
    // nodemailer's own logger stays off: its debug output would carry message bodies and AUTH.
    logger: false,
  };
}

/** Fails the start on a DKIM key that cannot sign, rather than every send later. */
export function checkDkimKey(config: SmtpConfig): void {
  if (!config.dkim) return;
  let type: string | undefined;
  try {
    type = createPrivateKey(config.dkim.privateKey).asymmetricKeyType;
  } catch (e) {
    throw new Error(
      `smtp plugin: dkim.privateKey is not a PEM private key (${(e as Error).message})`,
    );
  }
  if (type !== 'rsa')
    throw new Error(
      `smtp plugin: dkim.privateKey is a ${type} key; nodemailer signs with rsa-sha256 only`,
    );
}

export type SmtpTransporter = Transporter;

export function createTransporter(config: SmtpConfig): SmtpTransporter {
  const options = transportOptions(config);
  return (config.pool ?? true)
    ? nodemailer.createTransport({ ...options, pool: true })
    : nodemailer.createTransport(options);
}
