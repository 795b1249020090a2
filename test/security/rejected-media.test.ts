import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { startTestService, uniqueKey } from '../harness/service.ts';

/**
 * A rejected request stores nothing, files included. Found by probing the running service: 1 MB
 * inline images sent to a tenant that is not provisioned (400), with a reused Idempotency-Key and
 * another body (422), or over the daily quota (429) stayed in media storage for ever.
 */

const svc = await startTestService(t, { env: { ENS_DAILY_QUOTA: '2' } });
const client = await svc.createClient();
await svc.tenant(client, 'acme');
const mediaDir = join(svc.config.dataDir, 'media');

async function files(dir = mediaDir): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const out: string[] = [];
  for (const e of entries)
    out.push(...(e.isDirectory() ? await files(join(dir, e.name)) : [e.name]));
  return out;
}

const email = (tenant: string, image: Buffer) => ({
  tenant,
  event_type: 'report.ready',
  messages: [
    {
      channel: 'email',
      recipients: ['a@example.com'],
      content: {
        kind: 'rendered',
        subject: 's',
        body: 'report',
        html: '<img src="cid:logo">',
        inline_images: [{ cid: 'logo', media_type: 'image/png', data: image.toString('base64') }],
      },
    },
  ],
});

t.test('a tenant that is not provisioned: 400 and no file', async (t) => {
  const r = await svc.send(client, email('nobody', randomBytes(1024 * 1024)));
  t.equal(r.status, 400, r.text);
  t.same(await files(), [], 'media storage holds nothing');
});

t.test('an Idempotency-Key reused with another body: 422 and no file', async (t) => {
  const key = uniqueKey();
  const first = await svc.send(client, email('acme', randomBytes(1024)), key);
  t.equal(first.status, 202, first.text);
  const stored = await files();
  const r = await svc.send(client, email('acme', randomBytes(1024 * 1024)), key);
  t.equal(r.status, 422, r.text);
  t.same(await files(), stored, 'only the accepted image is stored');
});

t.test('over the daily quota: 429 and no file', async (t) => {
  const ok = await svc.send(client, email('acme', randomBytes(1024)));
  t.equal(ok.status, 202, ok.text);
  const stored = await files();
  const r = await svc.send(client, email('acme', randomBytes(1024 * 1024)));
  t.equal(r.status, 429, r.text);
  t.same(await files(), stored, 'only the accepted images are stored');
});
