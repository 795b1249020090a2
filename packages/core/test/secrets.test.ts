import { randomBytes } from 'node:crypto';
import t from 'tap';
import { hashSecret, SecretBox, verifySecret } from '@ens/core/internal';

t.test(
  'client secrets are stored as scrypt hashes and verify only with the right secret',
  async (t) => {
    const stored = await hashSecret('s3cret');
    t.notMatch(stored, /s3cret/);
    t.match(stored, /^scrypt\$/);
    t.equal(await verifySecret('s3cret', stored), true);
    t.equal(await verifySecret('s3cret!', stored), false);
    t.equal(await verifySecret('s3cret', 'garbage'), false);
    t.not(await hashSecret('s3cret'), stored, 'salted: the same secret hashes differently');
  },
);

t.test(
  'callback secrets are sealed with AES-GCM and open only under the same master key',
  async (t) => {
    const key = randomBytes(32);
    const box = new SecretBox(key);
    const sealed = box.seal('whsec_abc');
    t.notMatch(sealed, /abc/);
    t.equal(box.open(sealed), 'whsec_abc');
    t.throws(
      () => new SecretBox(randomBytes(32)).open(sealed),
      'another master key cannot open it',
    );
    const parts = sealed.split('.');
    parts[3] = Buffer.from('tampered').toString('base64url');
    t.throws(() => box.open(parts.join('.')), 'tampering is detected');
  },
);
