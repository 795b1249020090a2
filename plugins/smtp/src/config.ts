import { Type } from 'typebox';

/** The plugin's settings, as ENS_PROVIDER_CONFIG gives them (defaults filled in by the schema). */
export interface SmtpConfig {
  host: string;
  port?: number;
  secure?: boolean;
  requireTLS?: boolean;
  auth?: { user: string; pass: string };
  tls?: { rejectUnauthorized?: boolean; ca?: string; servername?: string };
  fromAddress: string;
  fromName?: string;
  replyTo?: string;
  heloName?: string;
  dkim?: { domainName: string; keySelector: string; privateKey: string };
  pool?: boolean;
  maxConnections?: number;
  timeoutMs?: number;
  sendTimeoutMs?: number;
}

export const DEFAULT_PORT = 587;
export const DEFAULT_MAX_CONNECTIONS = 5;
/**
 * Longer than the 10 s of the HTTP plugins: relays that scan content answer the final "." of
 * DATA after seconds, and RFC 5321 4.5.3.2 asks clients for far longer waits than that.
 */
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_SEND_TIMEOUT_MS = 60_000;

const description = (d: string) => ({ description: d });

export const configSchema = Type.Object(
  {
    host: Type.String({
      minLength: 1,
      pattern: '^[^\\s/]+$',
      ...description(
        'SMTP relay host name or IP address, e.g. smtp.sendgrid.net or ' +
          'email-smtp.eu-west-1.amazonaws.com.',
      ),
    }),
    port: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 65_535,
        default: DEFAULT_PORT,
        ...description(
          'Relay port: 587 (submission, STARTTLS) by default; 465 with secure: true; 25 for an ' +
            'internal relay.',
        ),
      }),
    ),
    secure: Type.Optional(
      Type.Boolean({
        default: false,
        ...description(
          'Implicit TLS from the first byte (port 465). False: plain connection upgraded with ' +
            'STARTTLS (see requireTLS).',
        ),
      }),
    ),
    requireTLS: Type.Optional(
      Type.Boolean({
        default: true,
        ...description(
          'With secure false: insist on STARTTLS and fail the send when the relay does not ' +
            'offer it, so credentials and mail never cross the network in clear. Set false only ' +
            'for a relay on a trusted network without TLS.',
        ),
      }),
    ),
    auth: Type.Optional(
      Type.Object(
        {
          user: Type.String({
            minLength: 1,
            ...description('SMTP AUTH user name (AUTH PLAIN/LOGIN, whichever the relay offers).'),
          }),
          pass: Type.String({
            minLength: 1,
            ...description('SMTP AUTH password or API key. Never logged.'),
          }),
        },
        {
          additionalProperties: false,
          ...description(
            'Credentials for SMTP AUTH; omit for a relay that trusts the sending host.',
          ),
        },
      ),
    ),
    tls: Type.Optional(
      Type.Object(
        {
          rejectUnauthorized: Type.Optional(
            Type.Boolean({
              default: true,
              ...description(
                "Verify the relay's certificate. Leave true; trust a private CA with ca instead.",
              ),
            }),
          ),
          ca: Type.Optional(
            Type.String({
              minLength: 1,
              ...description(
                "PEM certificate(s) of a private CA that signed the relay's certificate.",
              ),
            }),
          ),
          servername: Type.Optional(
            Type.String({
              minLength: 1,
              ...description(
                'Name to verify the certificate against (and send as SNI) when host is an IP ' +
                  'address.',
              ),
            }),
          ),
        },
        {
          additionalProperties: false,
          ...description('TLS options for STARTTLS and implicit TLS.'),
        },
      ),
    ),
    fromAddress: Type.String({
      format: 'email',
      ...description(
        'Default From address (and MAIL FROM). The tenant setting from_address overrides it.',
      ),
    }),
    fromName: Type.Optional(
      Type.String({
        minLength: 1,
        ...description('Default From display name. The tenant setting from_name overrides it.'),
      }),
    ),
    replyTo: Type.Optional(
      Type.String({
        format: 'email',
        ...description('Default Reply-To address. The tenant setting reply_to overrides it.'),
      }),
    ),
    heloName: Type.Optional(
      Type.String({
        minLength: 1,
        pattern: '^[A-Za-z0-9.-]+$',
        ...description(
          "Name sent with EHLO; defaults to this machine's host name. Some relays refuse names " +
            'that do not resolve.',
        ),
      }),
    ),
    dkim: Type.Optional(
      Type.Object(
        {
          domainName: Type.String({
            minLength: 1,
            ...description(
              'The d= domain of the DKIM-Signature, whose DNS publishes the public key.',
            ),
          }),
          keySelector: Type.String({
            minLength: 1,
            ...description(
              'The s= selector: the key is published at <keySelector>._domainkey.<domainName>.',
            ),
          }),
          privateKey: Type.String({
            minLength: 1,
            ...description('PEM private key (RSA) that signs every message. Never logged.'),
          }),
        },
        {
          additionalProperties: false,
          ...description(
            'Sign every message with DKIM (rsa-sha256, relaxed/relaxed). Omit when the relay ' +
              'signs.',
          ),
        },
      ),
    ),
    pool: Type.Optional(
      Type.Boolean({
        default: true,
        ...description('Keep connections to the relay open and reuse them across sends.'),
      }),
    ),
    maxConnections: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 100,
        default: DEFAULT_MAX_CONNECTIONS,
        ...description('With pool: the most connections open to the relay at once.'),
      }),
    ),
    timeoutMs: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: 600_000,
        default: DEFAULT_TIMEOUT_MS,
        ...description(
          'How long to wait to connect, for the greeting, and for each reply (socket ' +
            'inactivity) before the send counts as a transient failure.',
        ),
      }),
    ),
    sendTimeoutMs: Type.Optional(
      Type.Integer({
        minimum: 100,
        maximum: 600_000,
        default: DEFAULT_SEND_TIMEOUT_MS,
        ...description(
          'Upper bound on one whole send, waiting for a pooled connection included; catches a ' +
            'relay that trickles bytes and never trips timeoutMs.',
        ),
      }),
    ),
  },
  // A misspelt setting must stop the start, not be silently ignored.
  { additionalProperties: false },
);
