/**
 * Text → short_message octets. GSM 03.38 (3GPP TS 23.038) default alphabet when every character is
 * in it, else UCS-2; long texts are split into concatenated segments with an 8-bit-reference UDH
 * (3GPP TS 23.040 9.2.3.24.1).
 *
 * GSM-7 is sent unpacked, one septet per octet, as SMPP's data_coding 0 expects: the SMSC packs it
 * for the air interface.
 */

/** The default alphabet, indexed by septet value; 0x1B is the escape to the extension table. */
const GSM_BASIC =
  '@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞ\u001bÆæßÉ !"#¤%&\'()*+,-./0123456789:;<=>?' +
  '¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà';

/** The extension table: each character is sent as 0x1B then this septet. */
const GSM_EXTENSION: Readonly<Record<string, number>> = {
  '\f': 0x0a,
  '^': 0x14,
  '{': 0x28,
  '}': 0x29,
  '\\': 0x2f,
  '[': 0x3c,
  '~': 0x3d,
  ']': 0x3e,
  '|': 0x40,
  '€': 0x65,
};

const GSM_INDEX = new Map<string, number>([...GSM_BASIC].map((ch, i) => [ch, i]));
GSM_INDEX.delete('\u001b'); // a bare escape in the text is not a character we can send

export const DATA_CODING_GSM7 = 0x00;
export const DATA_CODING_UCS2 = 0x08;

/**
 * Single-message and per-segment capacities in the unit of each coding (septets / UTF-16 units).
 */
const GSM_SINGLE = 160;
const GSM_SEGMENT = 153; // 160 less the 6-octet UDH (7 septets with fill bits)
const UCS2_SINGLE = 70;
const UCS2_SEGMENT = 67; // 140 octets less the 6-octet UDH, in 2-octet units
export const MAX_SEGMENTS = 255;

/** The GSM-7 septets for one character (one, or two with the escape), or null when it has none. */
function gsmSeptets(ch: string): number[] | null {
  const basic = GSM_INDEX.get(ch);
  if (basic !== undefined) return [basic];
  const ext = GSM_EXTENSION[ch];
  return ext === undefined ? null : [0x1b, ext];
}

/** The text as unpacked GSM-7 septets, or null when a character is outside the alphabet. */
export function encodeGsm7(text: string): Buffer | null {
  const out: number[] = [];
  for (const ch of text) {
    const s = gsmSeptets(ch);
    if (!s) return null;
    out.push(...s);
  }
  return Buffer.from(out);
}

/**
 * UCS-2 big-endian (UTF-16BE: characters beyond the BMP go as surrogate pairs, as handsets expect).
 */
export function encodeUcs2(text: string): Buffer {
  return Buffer.from(text, 'utf16le').swap16();
}

export interface EncodedText {
  dataCoding: typeof DATA_CODING_GSM7 | typeof DATA_CODING_UCS2;
  /** The payload of each submit_sm, without UDH; one element when the text fits one message. */
  segments: Buffer[];
}

/**
 * Splits by character, never inside a GSM escape pair or a UTF-16 surrogate pair, so each segment
 * decodes on its own (some handsets show segments that fail to reassemble).
 */
function split<T>(units: T[][], single: number, segment: number): T[][] {
  const total = units.reduce((n, u) => n + u.length, 0);
  if (total <= single) return [units.flat()];
  const out: T[][] = [];
  let cur: T[] = [];
  for (const u of units) {
    if (cur.length + u.length > segment) {
      out.push(cur);
      cur = [];
    }
    cur.push(...u);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

export function encodeText(text: string): EncodedText {
  const chars = [...text];
  const gsm = chars.map(gsmSeptets);
  if (gsm.every((s): s is number[] => s !== null)) {
    return {
      dataCoding: DATA_CODING_GSM7,
      segments: split(gsm, GSM_SINGLE, GSM_SEGMENT).map((s) => Buffer.from(s)),
    };
  }
  // UTF-16 code units per character: two for a surrogate pair.
  const units = chars
    .map((ch) => [...encodeUcs2(ch)])
    .map((bytes) => {
      const u: number[][] = [];
      for (let i = 0; i < bytes.length; i += 2) u.push([bytes[i]!, bytes[i + 1]!]);
      return u;
    });
  const segments = split(units, UCS2_SINGLE, UCS2_SEGMENT).map((s) => Buffer.from(s.flat()));
  return { dataCoding: DATA_CODING_UCS2, segments };
}

/**
 * UDH for concatenated SMS with an 8-bit reference: IEI 0x00, length 3, ref, total, sequence from
 * 1.
 */
export function concatUdh(ref: number, total: number, seq: number): Buffer {
  return Buffer.from([0x05, 0x00, 0x03, ref & 0xff, total, seq]);
}
