import { definePlugin, permanentError, type PluginContext, type Provider } from '@ens/plugin-sdk';
import { composeMail } from './compose.ts';
import { configSchema, DEFAULT_SEND_TIMEOUT_MS, type SmtpConfig } from './config.ts';
import { classifySmtpError } from './error-classes.ts';
import { checkDkimKey, createTransporter } from './transport.ts';

export type { SmtpConfig } from './config.ts';

/**
 * Email through any SMTP relay (a provider's SMTP endpoint, or the organisation's own MTA) with
 * nodemailer: STARTTLS or implicit TLS, AUTH, optional DKIM signing and a connection pool. The
 * provider message id is the Message-ID header ENS sets, which is what bounces and the relay's
 * logs quote back. The envelope sender is the delivery's signed return path when ENS gives one,
 * so bounces written later by any relay reach ENS's inbound role (services/inbound).
 */
export default definePlugin<SmtpConfig>({
  name: 'smtp',
  channels: ['email'],
  // 1.3: recipient refusals (recipientError), the signed return path and one-click unsubscribe.
  sdk: '^1.3.0',
  configSchema,
  create(config, context: PluginContext): Provider {
    checkDkimKey(config);
    if (config.port === 465 && config.secure !== true) {
      context.logger.warn(
        { host: config.host, port: 465 },
        'smtp: port 465 expects implicit TLS; set secure: true, or sends will time out waiting ' +
          'for the greeting',
      );
    }
    const transporter = createTransporter(config);
    // Failures of a send reach its caller; this is for anything else the transport reports,
    // which as an unhandled 'error' event would take the whole worker down.
    transporter.on('error', (err: Error) =>
      context.logger.warn(
        { err: { message: err.message, code: (err as { code?: string }).code } },
        'smtp: transport error',
      ),
    );
    const sendTimeoutMs = config.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
    let closed = false;

    return {
      async send(m) {
        if (m.channel !== 'email')
          throw permanentError(
            `smtp: cannot send on channel ${m.channel}; this plugin sends email only`,
          );
        const { mail, messageId } = await composeMail(m, config, context.media);
        let info: { messageId?: string; response?: string };
        try {
          info = await transporter.sendMail({
            ...mail,
            signal: AbortSignal.timeout(sendTimeoutMs),
          });
        } catch (e) {
          throw classifySmtpError(e, { sendTimeoutMs });
        }
        // The relay's queue id (in its 250 reply) is what its own logs use; logged for tracing.
        context.logger.info(
          { deliveryId: m.deliveryId, messageId, relayResponse: info.response },
          'smtp: relay accepted the message',
        );
        return { providerMessageId: info.messageId || messageId };
      },

      /** Connects, upgrades to TLS when configured, and authenticates; sends nothing. */
      async checkCredentials() {
        try {
          await transporter.verify();
        } catch (e) {
          throw classifySmtpError(e);
        }
      },

      async close() {
        if (closed) return;
        closed = true;
        // Pooled connections in the middle of a message finish it; idle ones close now.
        transporter.close();
      },
    };
  },
});
