import { permanentError } from '@ens/plugin-sdk';

/** The parts of the v1 `Message` resource this plugin fills. */
export interface FcmMessage {
  token: string;
  notification?: { title?: string; body?: string };
  data?: Record<string, string>;
}

/**
 * Maps ENS push content (spec: `subject` is the push title, `body` the text, `data` a string map
 * for the app) onto an FCM v1 message for one registration token. A message with neither title
 * nor body is sent as a data message (no notification block), which FCM allows.
 */
export function buildMessage(
  token: string,
  content: Readonly<Record<string, unknown>>,
): FcmMessage {
  const message: FcmMessage = { token };
  const notification: { title?: string; body?: string } = {};
  if (content.subject !== undefined && content.subject !== null)
    notification.title = text(content.subject, 'subject');
  if (content.body !== undefined && content.body !== null)
    notification.body = text(content.body, 'body');
  if (notification.title !== undefined || notification.body !== undefined)
    message.notification = notification;
  if (content.data !== undefined && content.data !== null) {
    if (typeof content.data !== 'object' || Array.isArray(content.data))
      throw permanentError('fcm: content.data must be a map of string to string');
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(content.data as Record<string, unknown>))
      data[k] = text(v, `data.${k}`);
    if (Object.keys(data).length > 0) message.data = data;
  }
  return message;
}

// FCM's data values are strings only (a number is refused as INVALID_ARGUMENT); ENS validates
// content against the spec, so this only guards against a caller bypassing it.
function text(v: unknown, field: string): string {
  if (typeof v !== 'string')
    throw permanentError(
      `fcm: content.${field} must be a string, not ${Array.isArray(v) ? 'an array' : typeof v}`,
    );
  return v;
}
