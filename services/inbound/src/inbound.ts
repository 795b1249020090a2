import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import {
  SMTPServer,
  type SMTPServerDataStream,
  type SMTPServerOptions,
  type SMTPServerSession,
} from 'smtp-server';
import { ConfigError, type Runtime } from '@ens/core';
import { registerLoop } from '@ens/core/internal';
import { handleMessage } from './handle-message.ts';
import { inboundMessages, inboundRefusals } from './metrics.ts';
import { PeerLimits } from './peer-limits.ts';
import { readRecipient, type RecipientRules } from './recipient.ts';

/**
 * The inbound role: an SMTP listener (smtp-server, the server half of nodemailer's project) for
 * the return-path domain, which the domain's MX points at. Relays send it bounces and mailbox
 * providers complaints about ENS's mail; people's mail clients send it one-click unsubscribes by
 * mail. See handle-message.ts for what it does with each, recipient.ts for what it takes at all.
 *
 * Defences, each against a peer that is not a well-behaved MTA: only signed addresses pass RCPT
 * TO (550 5.1.1 otherwise), one recipient per message (452 4.5.3 asks for the next one apart, as
 * RFC 5321 lets a server do), a size limit advertised with SIZE and enforced while reading (552
 * 5.3.4, nothing kept past the limit), per-peer budgets (peer-limits.ts; 421 4.7.0), a cap on
 * connections in all, an inactivity timeout, no AUTH, and every failure inside a message's
 * handling answered 451 or 5xx rather than thrown: a malformed message never stops the listener.
 */

export interface InboundRole {
  /** The port it listens on (ENS_INBOUND_PORT, or the one the system chose for 0). */
  port: number;
  stop(): Promise<void>;
}

/** Connections open at once, from every peer: beyond it smtp-server answers 421. */
const MAX_CLIENTS = 200;
/**
 * Connections one peer may hold open at once (Postfix opens up to 20 to one destination by default;
 * bounces need few).
 */
const MAX_CONNECTIONS_PER_PEER = 10;

const reply = (code: number, text: string): Error =>
  Object.assign(new Error(text), { responseCode: code });

/**
 * Starts listening; resolves once the port is bound. Throws ConfigError when the return-path
 * domain is unset or the STARTTLS files cannot be read.
 */
export async function startInbound(rt: Runtime): Promise<InboundRole> {
  const domain = rt.config.consent.returnPathDomain;
  if (!domain)
    throw new ConfigError(
      'the inbound role needs ENS_RETURN_PATH_DOMAIN: the domain whose mail it receives',
    );
  const cfg = rt.config.inbound;
  const logger = rt.logger.child({ role: 'inbound' });
  const rules: RecipientRules = {
    key: rt.consentKey,
    domain,
    feedbackAddress: cfg.feedbackAddress,
  };
  const tls = readTls(cfg.tlsCert, cfg.tlsKey);
  const limits = new PeerLimits({
    perMinute: cfg.peerRateLimit,
    maxConnections: MAX_CONNECTIONS_PER_PEER,
  });
  const admitted = new Set<string>();
  const inFlight = new Set<Promise<unknown>>();

  const options: SMTPServerOptions = {
    banner: 'ENS inbound: bounces, complaints and unsubscribes only',
    secure: false,
    ...(tls
      ? { key: tls.key, cert: tls.cert, disabledCommands: ['AUTH'] }
      : { disabledCommands: ['AUTH', 'STARTTLS'], hideSTARTTLS: true }),
    authOptional: true,
    disableReverseLookup: true,
    size: cfg.maxMessageBytes,
    maxClients: MAX_CLIENTS,
    socketTimeout: cfg.timeoutMs,
    closeTimeout: cfg.timeoutMs,
    logger: false,

    onConnect(session, callback) {
      limits.admitConnection(session.remoteAddress).then(
        (verdict) => {
          if (verdict === 'ok') {
            admitted.add(session.id);
            return callback();
          }
          inboundRefusals.inc({ stage: 'connect', reason: verdict });
          callback(
            reply(
              421,
              verdict === 'rate_limited'
                ? '4.7.0 Too many connections and messages from your address; try again later'
                : '4.7.0 Too many open connections from your address; try again later',
            ),
          );
        },
        (err: unknown) =>
          callback(
            reply(421, `4.3.0 Try again later (${(err as Error)?.message ?? 'limiter failed'})`),
          ),
      );
    },

    onClose(session) {
      if (admitted.delete(session.id)) limits.released(session.remoteAddress);
    },

    onMailFrom(_address, session, callback) {
      limits.admitMessage(session.remoteAddress).then(
        (ok) => {
          if (ok) return callback();
          inboundRefusals.inc({ stage: 'mail', reason: 'rate_limited' });
          callback(reply(421, '4.7.0 Too many messages from your address; try again later'));
        },
        () => callback(reply(451, '4.3.0 Try again later')),
      );
    },

    onRcptTo(address, session, callback) {
      if (session.envelope.rcptTo.length >= 1) {
        inboundRefusals.inc({ stage: 'rcpt', reason: 'too_many_recipients' });
        return callback(
          reply(
            452,
            '4.5.3 One recipient per message here: send the next one in its own transaction',
          ),
        );
      }
      if (!readRecipient(rules, address.address)) {
        inboundRefusals.inc({ stage: 'rcpt', reason: 'unknown_recipient' });
        return callback(reply(550, '5.1.1 No such mailbox here'));
      }
      callback();
    },

    onData(stream, session, callback) {
      const work = receive(stream, session).then(
        (r) => callback(r.error ?? null, r.error ? undefined : r.message),
        (err: unknown) => {
          // Not reached in practice (receive answers every failure); a last guard for the listener.
          logger.error({ err }, 'inbound: message handling failed');
          callback(reply(451, '4.3.0 Temporary failure; try again later'));
        },
      );
      inFlight.add(work);
      void work.finally(() => inFlight.delete(work));
    },
  };

  /**
   * Reads the message up to the size limit, then decides: an Error is a refusal, a message the 250
   * text.
   */
  async function receive(
    stream: SMTPServerDataStream,
    session: SMTPServerSession,
  ): Promise<{ error?: Error; message?: string }> {
    const chunks: Buffer[] = [];
    let size = 0;
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        // Past the limit the rest is read and dropped: smtp-server must see the end of DATA to
        // answer.
        if (size <= cfg.maxMessageBytes) chunks.push(chunk);
      });
      stream.once('end', resolve);
      stream.once('error', reject);
    });
    if (stream.sizeExceeded || size > cfg.maxMessageBytes) {
      inboundMessages.inc({ result: 'too_large' });
      return {
        error: reply(
          552,
          `5.3.4 Message too big: this address takes up to ${cfg.maxMessageBytes} bytes`,
        ),
      };
    }
    const to = readRecipient(rules, session.envelope.rcptTo[0]?.address ?? '');
    if (!to) return { error: reply(503, '5.5.1 No valid recipient') };
    try {
      const outcome = await handleMessage(rt, rules, to, Buffer.concat(chunks));
      inboundMessages.inc({ result: outcome.result });
      if (!outcome.accepted) {
        logger.debug(
          { result: outcome.result, peer: session.remoteAddress },
          'inbound: message refused',
        );
        return { error: reply(outcome.code, outcome.message) };
      }
      logger.info(
        { result: outcome.result, deliveryId: outcome.deliveryId },
        'inbound: report recorded',
      );
      return { message: `2.6.0 Recorded (${outcome.result})` };
    } catch (err) {
      inboundMessages.inc({ result: 'error' });
      logger.warn({ err }, 'inbound: could not record a report; the sender is told to retry');
      return { error: reply(451, '4.3.0 Temporary failure recording the report; try again later') };
    }
  }

  const server = new SMTPServer(options);
  // smtp-server reports a connection's socket errors (resets, TLS failures) here; left unheard,
  // an 'error' event would end the process.
  server.on('error', (err: Error) =>
    logger.debug(
      { err: { message: err.message, code: (err as { code?: string }).code } },
      'inbound: connection error',
    ),
  );
  const health = registerLoop('smtp', 'inbound');
  const port = await new Promise<number>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(cfg.port, cfg.host, () => {
      server.server.off('error', reject);
      resolve((server.server.address() as AddressInfo).port);
    });
  }).catch((e: unknown) => {
    health.remove();
    throw e;
  });
  let stopping = false;
  server.server.on('close', () => {
    if (!stopping) health.down('the SMTP listener closed');
  });
  health.up();
  logger.info(
    { port, host: cfg.host, domain, starttls: tls !== null },
    'inbound: listening for bounces, complaints and unsubscribes',
  );

  return {
    port,
    async stop() {
      stopping = true;
      health.remove();
      await new Promise<void>((resolve) => {
        server.server.close(() => resolve());
        // Messages being recorded finish; connections left idle are told to come back later.
        void Promise.allSettled([...inFlight]).then(() => {
          for (const c of server.connections) {
            c.send(421, '4.3.2 Service shutting down; try again later');
            c.close();
          }
        });
      });
    },
  };
}

function readTls(
  certFile: string | undefined,
  keyFile: string | undefined,
): { cert: Buffer; key: Buffer } | null {
  if (!certFile || !keyFile) return null;
  try {
    return { cert: readFileSync(certFile), key: readFileSync(keyFile) };
  } catch (e) {
    throw new ConfigError(
      `ENS_INBOUND_TLS_CERT / ENS_INBOUND_TLS_KEY: cannot read the STARTTLS certificate or key (${(e as Error).message})`,
    );
  }
}
