import {
  definePlugin,
  permanentError,
  transientError,
  type OutboundMessage,
  type PluginContext,
  type Provider,
} from '@ens/plugin-sdk';
import { TwilioApi } from './api-client.ts';
import { configSchema, type TwilioConfig } from './config.ts';
import { inboundRoute } from './inbound-message.ts';
import { statusRoute } from './status-callback.ts';

/**
 * SMS through Twilio Programmable Messaging: one Message resource per send, delivery outcomes
 * from Twilio's signed status callbacks, and STOP/START texted back from its signed
 * incoming-message webhook.
 */

/** The sender fields of a send: the tenant's sender_id beats the configured default. */
function senderFor(
  config: TwilioConfig,
  m: OutboundMessage,
): { from?: string; messagingServiceSid?: string } {
  const tenantSender =
    typeof m.tenantSettings.sender_id === 'string' && m.tenantSettings.sender_id !== ''
      ? m.tenantSettings.sender_id
      : undefined;
  // With a Messaging Service the service picks from its pool unless the tenant names a sender;
  // a configured default From would pin every message to one number and defeat the pool.
  const from = tenantSender ?? (config.messagingServiceSid ? undefined : config.from);
  return { from, messagingServiceSid: config.messagingServiceSid };
}

function createProvider(config: TwilioConfig, context: PluginContext): Provider {
  const api = new TwilioApi(config);
  return {
    async send(m) {
      if (m.channel !== 'sms')
        throw permanentError(
          `twilio: channel ${m.channel} is not served by this plugin (sms only)`,
        );
      const body = m.content.body;
      if (typeof body !== 'string' || body === '')
        throw permanentError('twilio: the sms content has no body to send');
      const { sid } = await api.createMessage({
        to: m.recipient,
        body,
        ...senderFor(config, m),
        statusCallback: config.statusCallbackUrl,
      });
      return { providerMessageId: sid };
    },
    routes: [
      statusRoute({
        authToken: config.authToken,
        statusCallbackUrl: config.statusCallbackUrl,
        context,
      }),
      inboundRoute({
        authToken: config.authToken,
        inboundUrl: config.inboundUrl,
        from: config.from,
        messagingServiceSid: config.messagingServiceSid,
        helpText: config.helpText,
        context,
      }),
    ],
    async checkCredentials() {
      const { status } = await api.fetchAccount();
      // Twilio authenticates a suspended or closed account's credentials but will not send with
      // them.
      if (status !== undefined && status !== 'active')
        throw transientError(`twilio: account ${config.accountSid} is ${status}`);
    },
    async close() {
      // Requests are plain fetch calls bounded by their timeout; nothing is held open.
    },
  };
}

export default definePlugin<TwilioConfig>({
  name: 'twilio',
  channels: ['sms'],
  // 1.3: recipientError and context.reportRecipient.
  sdk: '^1.3.0',
  configSchema,
  create: createProvider,
});
