import { createHash, createVerify, type KeyObject } from 'node:crypto';

/**
 * Verifies an rsa-sha256, relaxed/relaxed DKIM-Signature (RFC 6376 3.4.2, 3.4.4, 3.7) over a
 * message exactly as the server received it: independent of nodemailer's signer, so a test that
 * passes shows the signature a receiving MTA would check really holds.
 */
export interface DkimResult {
  ok: boolean;
  reason: string;
  tags: Record<string, string>;
}

function parseTags(value: string): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const part of value.split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    tags[part.slice(0, i).trim()] = part.slice(i + 1).replace(/\s+/g, '');
  }
  return tags;
}

/**
 * Header fields of the raw header block, unfolding nothing: each as "Name: value" with its own
 * CRLFs.
 */
function headerFields(block: string): string[] {
  const fields: string[] = [];
  for (const line of block.split('\r\n')) {
    if (/^[ \t]/.test(line) && fields.length > 0) fields[fields.length - 1] += `\r\n${line}`;
    else fields.push(line);
  }
  return fields;
}

/**
 * RFC 6376 3.4.2: lower-case name, unfold, runs of WSP to one space, no WSP around the colon or at
 * the end.
 */
function relaxedHeader(field: string): string {
  const i = field.indexOf(':');
  const name = field.slice(0, i).trim().toLowerCase();
  const value = field
    .slice(i + 1)
    .replace(/\r\n/g, '')
    .replace(/[ \t]+/g, ' ')
    .trim();
  return `${name}:${value}`;
}

/**
 * RFC 6376 3.4.4: WSP runs to one space, none at line ends, no trailing empty lines, one final
 * CRLF.
 */
function relaxedBody(body: string): string {
  const lines = body.split('\r\n').map((l) => l.replace(/[ \t]+/g, ' ').replace(/ $/, ''));
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines.length === 0 ? '' : `${lines.join('\r\n')}\r\n`;
}

export function verifyDkim(raw: Buffer, publicKey: KeyObject): DkimResult {
  const text = raw.toString('latin1');
  const split = text.indexOf('\r\n\r\n');
  const block = split < 0 ? text : text.slice(0, split);
  const body = split < 0 ? '' : text.slice(split + 4);
  const fields = headerFields(block);
  const sigField = fields.find((f) => /^dkim-signature\s*:/i.test(f));
  if (!sigField) return { ok: false, reason: 'no DKIM-Signature header', tags: {} };
  const tags = parseTags(sigField.slice(sigField.indexOf(':') + 1));
  if (tags.a !== 'rsa-sha256') return { ok: false, reason: `a=${tags.a}`, tags };
  if (tags.c !== 'relaxed/relaxed') return { ok: false, reason: `c=${tags.c}`, tags };

  const bh = createHash('sha256').update(relaxedBody(body), 'latin1').digest('base64');
  if (bh !== tags.bh) return { ok: false, reason: `body hash ${bh} != bh=${tags.bh}`, tags };

  // Each name in h= takes the last not yet used instance of that field (RFC 6376 5.4.2).
  const pool = fields.filter((f) => f !== sigField);
  let signed = '';
  for (const name of (tags.h ?? '').split(':')) {
    const idx = pool
      .map((f) => f.slice(0, f.indexOf(':')).trim().toLowerCase())
      .lastIndexOf(name.toLowerCase());
    if (idx < 0) continue;
    signed += `${relaxedHeader(pool[idx]!)}\r\n`;
    pool.splice(idx, 1);
  }
  // The signature field itself, with the b= value emptied and no trailing CRLF.
  signed += relaxedHeader(sigField.replace(/(;\s*b=)[^;]*/, '$1'));
  const ok = createVerify('RSA-SHA256')
    .update(signed, 'latin1')
    .verify(publicKey, tags.b ?? '', 'base64');
  return { ok, reason: ok ? 'signature verified' : 'signature does not verify', tags };
}
