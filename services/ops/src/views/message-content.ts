import { html, type Html } from './html.ts';

/*
 * What a delivery sent, as the console shows it: never an image's bytes (only its name, type and
 * size), and never what is likely a secret. A value is held back when its name says it is one
 * (token, secret, password, code…), when it is a WhatsApp button's URL suffix (a per-user link
 * token), and, for event types of sign-in and verification flows, the whole text: a one-time code
 * or a reset link is the message there. Hidden values say that they were hidden and why.
 */

const SECRET_NAME =
  /token|secret|passw|pass_?code|otp|pin\b|code|key|auth|signature|session|cookie|credential/i;
const SECRET_EVENT =
  /otp|verif|auth|login|sign[_.-]?in|password|passcode|2fa|mfa|one[_.-]?time|magic[_.-]?link|reset|code/i;

export const HIDDEN_SECRET = 'hidden: may be a secret';
export const HIDDEN_FLOW = 'hidden: this event type carries one-time codes or links';

export interface ShownField {
  name: string;
  value: string;
  hidden?: boolean;
}

/**
 * The stored content as name/value pairs, secrets and images left out. Pure, so it is tested
 * directly.
 */
export function contentFields(eventType: string, content: Record<string, unknown>): ShownField[] {
  const secretFlow = SECRET_EVENT.test(eventType);
  const out: ShownField[] = [];
  const text = (name: string, v: unknown) => {
    if (typeof v !== 'string') return;
    out.push(secretFlow ? { name, value: HIDDEN_FLOW, hidden: true } : { name, value: v });
  };
  if (typeof content.kind === 'string') out.push({ name: 'kind', value: content.kind });
  if (typeof content.template_name === 'string')
    out.push({ name: 'template_name', value: content.template_name });
  if (typeof content.language === 'string') out.push({ name: 'language', value: content.language });
  text('subject', content.subject);
  text('body', content.body);
  if (typeof content.html === 'string') {
    out.push(
      secretFlow
        ? { name: 'html', value: HIDDEN_FLOW, hidden: true }
        : { name: 'html', value: content.html },
    );
  }
  if (Array.isArray(content.body_params)) {
    for (const [i, p] of content.body_params.entries())
      out.push(
        secretFlow
          ? { name: `body_params[${i}]`, value: HIDDEN_FLOW, hidden: true }
          : { name: `body_params[${i}]`, value: String(p) },
      );
  }
  if (typeof content.url_button_suffix === 'string')
    out.push({ name: 'url_button_suffix', value: HIDDEN_SECRET, hidden: true });
  if (content.data && typeof content.data === 'object') {
    for (const [k, v] of Object.entries(content.data as Record<string, unknown>)) {
      out.push(
        secretFlow || SECRET_NAME.test(k)
          ? { name: `data.${k}`, value: secretFlow ? HIDDEN_FLOW : HIDDEN_SECRET, hidden: true }
          : { name: `data.${k}`, value: String(v) },
      );
    }
  }
  if (Array.isArray(content.inline_images)) {
    for (const img of content.inline_images as {
      cid?: string;
      media_type?: string;
      size?: number;
    }[]) {
      out.push({
        name: `inline image ${img.cid ?? ''}`.trim(),
        value: `${img.media_type ?? 'image'}, ${img.size ?? '?'} bytes (not shown)`,
        hidden: true,
      });
    }
  }
  return out;
}

export function messageContent(eventType: string, content: Record<string, unknown> | null): Html {
  if (!content)
    return html`<p class="muted">The stored handoff has no content for this channel.</p>`;
  const fields = contentFields(eventType, content);
  return html`<dl class="content" id="message-content">
${fields.map((f) => html`<div${f.hidden ? html` class="hidden-value"` : ''}><dt>${f.name}</dt><dd>${f.hidden ? html`<em class="muted">${f.value}</em>` : html`<pre tabindex="0">${f.value}</pre>`}</dd></div>`)}
</dl>`;
}
