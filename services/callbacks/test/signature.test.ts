import { createHmac, timingSafeEqual } from 'node:crypto';
import t from 'tap';
import { ensSignature, standardWebhookHeaders, verifyEnsSignature } from '../src/post/signature.ts';

// Expected values below were computed outside this code base:
//   printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$SECRET"
// and, for Standard Webhooks, `... | openssl dgst -sha256 -hmac "$SECRET" -binary | base64`
// over "$ID.$TS.$BODY". Non-ASCII on purpose: keys and bodies are UTF-8 bytes.
const BODY = '{"id":"msg_01","state":"delivered","note":"héllo ✓"}';
const SECRET = 'ens_cb_secret_Ünïcode_42';
const BODY_HEX = '92f8b19a03abea98b0202c8d4bd2be117844fd2b5c63ed475fff9e5e0a94eb81';

t.test('ensSignature matches openssl known answers', async (t) => {
  t.equal(ensSignature(BODY, SECRET), BODY_HEX);
  t.equal(
    ensSignature(Buffer.from(BODY, 'utf8'), SECRET),
    BODY_HEX,
    'Buffer and string sign the same bytes',
  );
  t.equal(
    ensSignature('{"a":1}', 'k'),
    'c3a92ff9e274cdcce27a58c15a78ec6dcbbdbd0038a87e7a11baef2028fd8bff',
  );
  t.match(ensSignature('', 'k'), /^[0-9a-f]{64}$/, 'empty body is fine, output is lower-case hex');
});

t.test('ensSignature refuses an empty secret', async (t) => {
  t.throws(() => ensSignature(BODY, ''), TypeError);
});

t.test('verifyEnsSignature', async (t) => {
  const raw = Buffer.from(BODY, 'utf8');
  t.equal(verifyEnsSignature(raw, SECRET, BODY_HEX), true);
  t.equal(verifyEnsSignature(BODY, SECRET, BODY_HEX), true);
  t.equal(verifyEnsSignature(raw, SECRET, BODY_HEX.toUpperCase()), true, 'hex case is ignored');
  t.equal(
    verifyEnsSignature(raw, SECRET, ` ${BODY_HEX} `),
    true,
    'surrounding whitespace is ignored',
  );
  t.equal(verifyEnsSignature(raw, 'other', BODY_HEX), false, 'wrong secret');
  t.equal(
    verifyEnsSignature(Buffer.from(`${BODY} `), SECRET, BODY_HEX),
    false,
    'body changed by one byte',
  );
  t.equal(verifyEnsSignature(raw, SECRET, BODY_HEX.slice(0, 63)), false, 'truncated');
  t.equal(verifyEnsSignature(raw, SECRET, `${BODY_HEX}0`), false, 'too long');
  t.equal(
    verifyEnsSignature(raw, SECRET, BODY_HEX.replace(/.$/, '0')),
    false,
    'last digit changed',
  );
  t.equal(verifyEnsSignature(raw, SECRET, ''), false);
  t.equal(verifyEnsSignature(raw, SECRET, undefined), false);
  t.equal(verifyEnsSignature(raw, SECRET, null), false);
  t.equal(
    verifyEnsSignature(raw, '', BODY_HEX),
    false,
    'empty secret never verifies and does not throw',
  );
  t.equal(verifyEnsSignature(raw, SECRET, `sha256=${BODY_HEX}`), false, 'no prefixes');
});

/**
 * A Standard Webhooks v1 verifier written from the spec text
 * (standard-webhooks/spec/standard-webhooks.md, "Signature scheme", "Webhook headers",
 * "Verifying signatures"), not from our implementation:
 * - secrets are serialised as `whsec_` + base64; the HMAC key is the decoded bytes;
 * - signed content is `{msg_id}.{timestamp}.{payload}`, timestamp in integer Unix seconds;
 * - `webhook-signature` is a space-delimited list of `<version>,<base64 signature>`; v1 is
 *   HMAC-SHA256; compare in constant time; check the timestamp against a tolerance.
 */
function specVerify(
  whsecSecret: string,
  payload: Buffer,
  headers: Record<string, string>,
  nowSeconds: number,
  toleranceSeconds = 300,
): boolean {
  if (!whsecSecret.startsWith('whsec_'))
    throw new Error('receiver secret must be whsec_ serialised');
  const key = Buffer.from(whsecSecret.slice('whsec_'.length), 'base64');
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs || !/^[0-9]+$/.test(ts)) return false;
  if (Math.abs(nowSeconds - Number(ts)) > toleranceSeconds) return false;
  const expected = createHmac('sha256', key)
    .update(Buffer.concat([Buffer.from(`${id}.${ts}.`), payload]))
    .digest();
  for (const versioned of sigs.split(' ')) {
    const comma = versioned.indexOf(',');
    if (comma < 0 || versioned.slice(0, comma) !== 'v1') continue;
    const given = Buffer.from(versioned.slice(comma + 1), 'base64');
    if (given.length === expected.length && timingSafeEqual(given, expected)) return true;
  }
  return false;
}

const asWhsec = (plain: string) => `whsec_${Buffer.from(plain, 'utf8').toString('base64')}`;

t.test('standardWebhookHeaders: reference library known answer (whsec_ secret)', async (t) => {
  // The "sign function works" vector from the standard-webhooks reference JS library tests,
  // re-derived with openssl.
  const headers = standardWebhookHeaders({
    webhookId: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    timestamp: new Date(1614265330 * 1000),
    rawBody: '{"test": 2432232314}',
    secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  });
  t.same(headers, {
    'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
    'webhook-timestamp': '1614265330',
    'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  });
});

t.test('standardWebhookHeaders: plain ENS secret is keyed with its UTF-8 bytes', async (t) => {
  const headers = standardWebhookHeaders({
    webhookId: 'cb_01HZX',
    timestamp: new Date(1700000000 * 1000 + 999), // sub-second part is floored
    rawBody: Buffer.from(BODY, 'utf8'),
    secret: SECRET,
  });
  t.same(headers, {
    'webhook-id': 'cb_01HZX',
    'webhook-timestamp': '1700000000',
    'webhook-signature': 'v1,WTpU3kBtNSpAboGE5G5OIk0fIuD3Rg0aWUG4B4Nixa8=',
  });
  const viaWhsec = standardWebhookHeaders({
    webhookId: 'cb_01HZX',
    timestamp: new Date(1700000000 * 1000),
    rawBody: BODY,
    secret: asWhsec(SECRET),
  });
  t.equal(
    viaWhsec['webhook-signature'],
    headers['webhook-signature'],
    'plain S == whsec_ + base64(S)',
  );
});

t.test('our headers pass a spec verifier; tampering fails it', async (t) => {
  const now = 1_750_000_000;
  const rawBody = Buffer.from(BODY, 'utf8');
  for (const secret of [SECRET, 'plain-ascii-secret', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw']) {
    const receiverSecret = secret.startsWith('whsec_') ? secret : asWhsec(secret);
    const headers: Record<string, string> = {
      ...standardWebhookHeaders({
        webhookId: 'msg_2KWPBgLlAfxdpx2AI54pPJ85f4W',
        timestamp: new Date(now * 1000),
        rawBody,
        secret,
      }),
    };
    t.equal(
      specVerify(receiverSecret, rawBody, headers, now),
      true,
      `verifies (${secret.slice(0, 6)}…)`,
    );
    t.equal(specVerify(receiverSecret, rawBody, headers, now + 299), true, 'within tolerance');
    t.equal(specVerify(receiverSecret, rawBody, headers, now + 301), false, 'stale');
    t.equal(
      specVerify(receiverSecret, Buffer.concat([rawBody, Buffer.from(' ')]), headers, now),
      false,
      'body tampered',
    );
    t.equal(
      specVerify(receiverSecret, rawBody, { ...headers, 'webhook-id': 'msg_other' }, now),
      false,
      'id tampered',
    );
    t.equal(
      specVerify(
        receiverSecret,
        rawBody,
        { ...headers, 'webhook-timestamp': String(now - 1) },
        now,
      ),
      false,
      'timestamp tampered',
    );
    t.equal(specVerify(asWhsec('wrong'), rawBody, headers, now), false, 'wrong secret');
    // Rotation: receivers must accept a list where any entry matches.
    const rotated = {
      ...headers,
      'webhook-signature': `v1,AAAA v1a,xyz ${headers['webhook-signature']}`,
    };
    t.equal(
      specVerify(receiverSecret, rawBody, rotated, now),
      true,
      'works inside a rotation list',
    );
  }
});

t.test('standardWebhookHeaders rejects unsafe inputs', async (t) => {
  const base = { webhookId: 'msg_1', timestamp: new Date(0), rawBody: '{}', secret: 's' };
  t.throws(
    () => standardWebhookHeaders({ ...base, webhookId: 'a.b' }),
    TypeError,
    '"." would make the content ambiguous',
  );
  t.throws(() => standardWebhookHeaders({ ...base, webhookId: '' }), TypeError);
  t.throws(() => standardWebhookHeaders({ ...base, webhookId: 'a\r\nx: y' }), TypeError);
  t.throws(() => standardWebhookHeaders({ ...base, webhookId: 'a b' }), TypeError);
  t.throws(() => standardWebhookHeaders({ ...base, timestamp: new Date(Number.NaN) }), TypeError);
  t.throws(() => standardWebhookHeaders({ ...base, secret: '' }), TypeError);
  t.throws(() => standardWebhookHeaders({ ...base, secret: 'whsec_' }), TypeError);
  t.throws(() => standardWebhookHeaders({ ...base, secret: 'whsec_not base64!' }), TypeError);
  t.throws(
    () => standardWebhookHeaders({ ...base, secret: 'whsec_abc' }),
    TypeError,
    'truncated base64',
  );
  t.doesNotThrow(() => standardWebhookHeaders({ ...base, timestamp: new Date(-1500) }));
  t.equal(standardWebhookHeaders({ ...base, timestamp: new Date(0) })['webhook-timestamp'], '0');
});
