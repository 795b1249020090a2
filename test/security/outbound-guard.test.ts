import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import webpush from 'web-push';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/**
 * SSRF through Web Push endpoints: a device registered with an endpoint on loopback made ENS POST
 * there, and the internal service's answer came back in last_error. Now the endpoint is refused
 * at registration, a device that got into the registry some other way is refused at send (DNS
 * checked, nothing reaches the internal service), and last_error carries no body from it.
 */
async function internalService(t: { teardown(fn: () => unknown): void }) {
  const hits: IncomingMessage[] = [];
  const server = createServer((req, res) => {
    hits.push(req);
    res
      .writeHead(400, { 'content-type': 'text/plain' })
      .end('INTERNAL-ONLY: admin token s3cr3t, database at 10.0.0.5');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/internal/admin`, hits };
}

t.test('a Web Push endpoint on an internal address', async (t) => {
  const internal = await internalService(t);
  const vapid = webpush.generateVAPIDKeys();
  const svc = await startTestService(t, {
    env: {
      ENS_ALLOW_PRIVATE_CALLBACKS: 'false',
      ENS_PROVIDERS: 'push=@ens/plugin-webpush',
      ENS_PROVIDER_CONFIG: JSON.stringify({
        '@ens/plugin-webpush': {
          vapidSubject: 'mailto:ops@ens.example',
          vapidPublicKey: vapid.publicKey,
          vapidPrivateKey: vapid.privateKey,
          allowHttpEndpoints: true,
        },
      }),
    },
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const subscription = {
    endpoint: internal.url,
    keys: {
      p256dh:
        'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
      auth: 'tBHItJI5svbpez7KI4CCXg',
    },
  };

  for (const endpoint of [
    internal.url,
    'https://[::1]/x',
    'https://169.254.169.254/latest/meta-data',
    'https://localhost/x',
    'https://0x7f.1/x',
    'https://[::ffff:127.0.0.1]/x',
  ]) {
    const r = await client.call('PUT', '/v2/tenants/acme/users/u1/devices/laptop', {
      body: { platform: 'webpush', subscription: { ...subscription, endpoint } },
    });
    t.equal(r.status, 400, `registration of ${endpoint} is refused`);
    t.match(r.body?.detail ?? '', /subscription\/endpoint/, 'the detail names the field');
  }
  t.equal(
    (await client.call('GET', '/v2/tenants/acme/users/u1/devices')).body?.results?.length ?? 0,
    0,
    'no device was stored',
  );

  // A device stored before the guard existed (or by another path) is refused at send time.
  await svc.rt.devices.put(client.clientId, 'acme', 'u2', 'old-laptop', 'webpush', subscription);
  const sent = await svc.send(
    client,
    {
      tenant: 'acme',
      event_type: 'x.y',
      messages: [
        { channel: 'push', recipients: ['u2'], content: { kind: 'rendered', body: 'hi' } },
      ],
    },
    uniqueKey(),
  );
  t.equal(sent.status, 202);
  const id = sent.body.deliveries[0].delivery_id as string;
  const row = await waitFor(
    async () => {
      const { rows } = await svc.rt.db.query<{ status: string; last_error: string | null }>(
        'SELECT status, last_error FROM deliveries WHERE id = $1',
        [id],
      );
      return rows[0]?.status !== 'pending' ? rows[0] : undefined;
    },
    20_000,
    'the push delivery to end',
  );
  t.equal(row.status, 'failed', 'the delivery failed');
  t.match(
    row.last_error ?? '',
    /endpoint is refused/,
    `last_error says the address was refused: ${row.last_error}`,
  );
  t.notMatch(
    row.last_error ?? '',
    /INTERNAL-ONLY|s3cr3t/,
    'no word of the internal service comes back',
  );
  t.equal(internal.hits.length, 0, 'the internal service was never reached');

  // The same address as a callback URL was already refused; it still is.
  const cb = await svc.send(
    client,
    smsHandoff('acme', ['+15551230000'], { callback_url: internal.url }),
    uniqueKey(),
  );
  t.equal(cb.status, 400, 'a callback_url on loopback is refused');
});
