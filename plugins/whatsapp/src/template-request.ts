import { permanentError, type OutboundMessage } from '@ens/plugin-sdk';

/**
 * Builds the Cloud API "send template" body from ENS's whatsapp content object
 * (template_name, language, body_params, url_button_suffix; see the spec's content table).
 */

interface TextParameter {
  type: 'text';
  text: string;
}

type Component =
  | { type: 'body'; parameters: TextParameter[] }
  | { type: 'button'; sub_type: 'url'; index: string; parameters: TextParameter[] };

export interface TemplateMessageBody {
  messaging_product: 'whatsapp';
  recipient_type: 'individual';
  to: string;
  type: 'template';
  template: {
    name: string;
    language: { code: string };
    components?: Component[];
  };
}

/** The Cloud API takes the number as digits without the `+` ENS normalises recipients to. */
export function waRecipient(recipient: string): string {
  return recipient.startsWith('+') ? recipient.slice(1) : recipient;
}

function requiredString(content: Readonly<Record<string, unknown>>, field: string): string {
  const v = content[field];
  // A malformed content object cannot improve on retry, so it is a permanent failure.
  if (typeof v !== 'string' || v.trim() === '')
    throw permanentError(`whatsapp: content.${field} must be a non-empty string`);
  return v;
}

export function templateMessageBody(message: OutboundMessage): TemplateMessageBody {
  const c = message.content;
  const name = requiredString(c, 'template_name');
  const language = requiredString(c, 'language');

  const components: Component[] = [];
  const params = c.body_params;
  if (params !== undefined && params !== null) {
    if (!Array.isArray(params) || !params.every((p) => typeof p === 'string')) {
      throw permanentError('whatsapp: content.body_params must be an array of strings');
    }
    // Meta counts the body's parameters against the template; an empty list means "no body
    // variables".
    if (params.length > 0)
      components.push({ type: 'body', parameters: params.map((text) => ({ type: 'text', text })) });
  }
  const suffix = c.url_button_suffix;
  if (suffix !== undefined && suffix !== null) {
    if (typeof suffix !== 'string')
      throw permanentError('whatsapp: content.url_button_suffix must be a string');
    // ENS's content has one URL button; the Cloud API addresses buttons by position, so it is index
    // 0.
    if (suffix !== '')
      components.push({
        type: 'button',
        sub_type: 'url',
        index: '0',
        parameters: [{ type: 'text', text: suffix }],
      });
  }

  return {
    messaging_product: 'whatsapp',
    recipient_type: 'individual',
    to: waRecipient(message.recipient),
    type: 'template',
    template: {
      name,
      language: { code: language },
      ...(components.length > 0 ? { components } : {}),
    },
  };
}
