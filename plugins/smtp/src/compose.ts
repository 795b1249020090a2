import {
  permanentError,
  transientError,
  type OutboundMessage,
  type PluginContext,
} from '@ens/plugin-sdk';
import type { SendMailOptions } from 'nodemailer';
import type { SmtpConfig } from './config.ts';

/** The email content object of POST /v2/messages, as OutboundMessage.content carries it. */
interface InlineImage {
  cid: string;
  media_type?: string;
  storage_key: string;
  filename?: string;
}

export interface ComposedMail {
  mail: SendMailOptions;
  /** The Message-ID header value, angle brackets included; the provider message id. */
  messageId: string;
}

const DEFAULT_IMAGE_TYPE = 'image/png';

/**
 * Header values built from caller data must stay on one line: a CR or LF would start a header of
 * the caller's choosing.
 */
const oneLine = (s: string, max = 998): string =>
  s
    // biome-ignore lint/suspicious/noControlCharactersInRegex: a CR or LF would start a header
    .replace(/[\x00-\x1f\x7f]+/g, ' ')
    .trim()
    .slice(0, max);

/**
 * A bare addr-spec: nodemailer would otherwise put anything it cannot parse on the envelope as
 * the null sender (MAIL FROM:<>) or drop it, and the relay would take a message no one can
 * answer. Quoted local parts are not accepted: no ENS address needs them.
 */
const ADDRESS = /^[^\s@<>()",;:\\[\]]+@[^\s@<>()",;:\\[\]]+$/;

function address(what: string, v: string): string {
  if (!ADDRESS.test(v))
    throw permanentError(
      `smtp: ${what} ${JSON.stringify(v.slice(0, 200))} is not an email address`,
    );
  return v;
}

const str = (v: unknown): string | undefined =>
  typeof v === 'string' && v.length > 0 ? v : undefined;

function inlineImages(content: Readonly<Record<string, unknown>>): InlineImage[] {
  const raw = content.inline_images;
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw permanentError('smtp: email content inline_images is not a list');
  return raw.map((img: unknown, i) => {
    const o = (img ?? {}) as Record<string, unknown>;
    const cid = str(o.cid);
    const key = str(o.storage_key);
    if (!cid) throw permanentError(`smtp: email content inline_images[${i}] has no cid`);
    if (!key)
      throw permanentError(
        `smtp: email content inline_images[${i}] (cid ${cid}) has no storage_key`,
      );
    return { cid, storage_key: key, media_type: str(o.media_type), filename: str(o.filename) };
  });
}

/**
 * A URI inside the angle brackets of List-Unsubscribe: no space, bracket, comma or quote can end it
 * early.
 */
const LIST_URI = /^(?:https?:\/\/|mailto:)[^\s<>,"]+$/;

/**
 * RFC 8058 one-click unsubscribe: `List-Unsubscribe: <https://…>, <mailto:…>` (RFC 2369; the
 * mailto only when ENS has a return-path domain to receive it) and `List-Unsubscribe-Post:
 * List-Unsubscribe=One-Click`. Both are DKIM-signed when the plugin signs (transport.ts adds
 * List-Unsubscribe-Post to the signed fields), as RFC 8058 section 4 requires. ENS builds both
 * URIs; one that would not stay inside its brackets is a fault in ENS's configuration, refused
 * rather than sent broken.
 */
function listUnsubscribe(
  u: NonNullable<OutboundMessage['unsubscribe']>,
): Record<string, { prepared: true; value: string }> {
  const uris = [u.url, ...(u.mailto ? [u.mailto] : [])];
  const bad = uris.find((x) => !LIST_URI.test(x));
  if (bad !== undefined)
    throw permanentError(
      `smtp: the unsubscribe URI ${JSON.stringify(bad.slice(0, 200))} cannot be written into List-Unsubscribe`,
    );
  return {
    'List-Unsubscribe': { prepared: true, value: uris.map((x) => `<${x}>`).join(', ') },
    'List-Unsubscribe-Post': { prepared: true, value: 'List-Unsubscribe=One-Click' },
  };
}

/** The part of an address after the last @, for the Message-ID's right-hand side. */
function domainOf(address: string): string {
  const d = address
    .slice(address.lastIndexOf('@') + 1)
    .toLowerCase()
    .replace(/[^a-z0-9.-]/g, '');
  return d.length > 0 ? d : 'ens.invalid';
}

/**
 * The Message-ID is `<deliveryId@from-domain>`, the same for every attempt of a delivery. A
 * retry after a timeout that struck once the relay had already taken the message then reaches
 * the mailbox with the Message-ID of the copy already there, which receivers (Gmail among them)
 * use to drop the duplicate.
 */
export function messageIdFor(m: OutboundMessage, fromAddress: string): string {
  const left = m.deliveryId.replace(/[^A-Za-z0-9._-]/g, '');
  return `<${left || 'ens'}@${domainOf(fromAddress)}>`;
}

/**
 * Builds the message nodemailer sends: text and html as multipart/alternative, inline images as
 * parts with a Content-ID inside multipart/related beside the html (nodemailer nests them so
 * when an attachment has a cid), From and Reply-To from the tenant or the plugin's defaults, the
 * envelope sender from the delivery's signed return path when ENS gives one (SDK 1.3), and the
 * one-click unsubscribe headers for bulk mail.
 * Throws permanent errors for content no retry can fix, transient ones when media storage fails.
 */
export async function composeMail(
  m: OutboundMessage,
  config: SmtpConfig,
  media: PluginContext['media'],
): Promise<ComposedMail> {
  const s = m.tenantSettings;
  const fromAddress = address(
    'the From address (tenant setting from_address or fromAddress)',
    str(s.from_address) ?? config.fromAddress,
  );
  const fromName = str(s.from_name) ?? config.fromName;
  const replyToRaw = str(s.reply_to) ?? config.replyTo;
  const replyTo =
    replyToRaw === undefined
      ? undefined
      : address('the Reply-To address (tenant setting reply_to or replyTo)', replyToRaw);
  const to = address('the recipient', m.recipient);
  // The envelope sender ENS signed for this delivery, so that a relay's bounce comes back to ENS;
  // the From header stays the tenant's or the plugin's.
  const returnPath =
    m.returnPath === undefined ? undefined : address('the return path', m.returnPath);
  const c = m.content;
  const text = str(c.body);
  const html = str(c.html);
  if (!text && !html) throw permanentError('smtp: email content has neither body nor html');
  const images = inlineImages(c);
  if (images.length > 0 && !html)
    throw permanentError('smtp: email content has inline_images but no html to show them');

  const attachments = await Promise.all(
    images.map(async (img) => {
      let stored: { bytes: Buffer; mediaType: string };
      try {
        stored = await media.get(img.storage_key);
      } catch (e) {
        throw transientError(
          `smtp: cannot read inline image ${img.cid} (storage_key ${img.storage_key}): ${(e as Error)?.message ?? String(e)}`,
          e,
        );
      }
      return {
        cid: img.cid,
        content: stored.bytes,
        contentType: img.media_type ?? (stored.mediaType || DEFAULT_IMAGE_TYPE),
        contentDisposition: 'inline' as const,
        ...(img.filename ? { filename: img.filename } : {}),
      };
    }),
  );

  const messageId = messageIdFor(m, fromAddress);
  const subject = typeof c.subject === 'string' ? oneLine(c.subject) : undefined;

  const mail: SendMailOptions = {
    from: fromName ? { name: oneLine(fromName), address: fromAddress } : fromAddress,
    to,
    ...(replyTo ? { replyTo } : {}),
    ...(subject !== undefined ? { subject } : {}),
    ...(text ? { text } : {}),
    ...(html ? { html } : {}),
    ...(attachments.length > 0 ? { attachments } : {}),
    messageId,
    ...(returnPath ? { envelope: { from: returnPath, to: [to] } } : {}),
    headers: {
      'X-ENS-Delivery-Id': oneLine(m.deliveryId, 200),
      'X-ENS-Event-Type': oneLine(m.eventType, 200),
      ...(m.unsubscribe ? listUnsubscribe(m.unsubscribe) : {}),
    },
  };
  return { mail, messageId };
}
