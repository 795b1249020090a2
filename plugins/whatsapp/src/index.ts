import {
  definePlugin,
  permanentError,
  transientError,
  type OutboundMessage,
  type PluginContext,
  type Provider,
} from '@ens/plugin-sdk';
import {
  configSchema,
  DEFAULT_API_VERSION,
  DEFAULT_GRAPH_URL,
  DEFAULT_TIMEOUT_MS,
  PHONE_NUMBER_ID,
  type WhatsAppConfig,
} from './config.ts';
import { GraphClient } from './graph-client.ts';
import { templateMessageBody } from './template-request.ts';
import { webhookRoutes } from './webhook.ts';

/**
 * WhatsApp through Meta's Cloud API: approved templates sent with POST /{phone-number-id}/messages,
 * delivered/read/failed learnt from the signed messages webhook.
 */

interface SendResponse {
  messaging_product?: string;
  contacts?: { input?: string; wa_id?: string }[];
  messages?: { id?: string; message_status?: string }[];
}

function senderFor(m: OutboundMessage, config: WhatsAppConfig): string {
  const override = m.tenantSettings.whatsapp_phone_number_id;
  if (override === undefined || override === null || override === '') return config.phoneNumberId;
  // The id is a URL path segment: anything but digits is a tenant misconfiguration, never sent on.
  if (typeof override !== 'string' || !PHONE_NUMBER_ID.test(override)) {
    throw permanentError(
      `whatsapp: tenant ${m.tenant} setting whatsapp_phone_number_id ${JSON.stringify(override)} is not a Cloud API phone number id (digits)`,
    );
  }
  return override;
}

export default definePlugin<WhatsAppConfig>({
  name: 'whatsapp',
  channels: ['whatsapp'],
  // 1.3: recipientError and context.reportRecipient.
  sdk: '^1.3.0',
  configSchema,
  create(config, context: PluginContext): Provider {
    const graph = new GraphClient({
      graphUrl: config.graphUrl ?? DEFAULT_GRAPH_URL,
      apiVersion: config.apiVersion ?? DEFAULT_API_VERSION,
      accessToken: config.accessToken,
      timeoutMs: config.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    });
    return {
      async send(m) {
        const body = templateMessageBody(m);
        const phoneNumberId = senderFor(m, config);
        const res = (await graph.request(
          'POST',
          `/${phoneNumberId}/messages`,
          body,
        )) as SendResponse | null;
        const id = res?.messages?.[0]?.id;
        if (typeof id !== 'string' || id === '') {
          throw transientError(
            `whatsapp: the send was answered without a message id: ${JSON.stringify(res).slice(0, 200)}`,
          );
        }
        return { providerMessageId: id };
      },
      async checkCredentials() {
        await graph.request('GET', `/${config.phoneNumberId}?fields=display_phone_number`);
      },
      routes: webhookRoutes(
        { appSecret: config.appSecret, verifyToken: config.verifyToken },
        context,
      ),
      async close() {
        // fetch keeps no per-provider state; nothing to release.
      },
    };
  },
});
