// The README's walk-through with the typed client: token → tenant → send → pull → verified
// callbacks → a replay. Every step checks its answer and stops the run (exit 1) on the first
// failure.
//
//   npx tsx examples/walkthrough.ts demo-client.secret.json
// with ENS running (ENS_ALLOW_PRIVATE_CALLBACKS=true npm start); ENS_URL names another base URL.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CallbackVerificationError,
  createEnsClient,
  verifyCallback,
  type CallbackPayload,
} from '@ens/client';

const baseUrl = process.env.ENS_URL ?? 'http://127.0.0.1:8080';
const clientFile = process.argv[2];
if (!clientFile)
  fail('give the client file: what `npx ens clients create --callback-secret` printed');
const creds = JSON.parse(readFileSync(clientFile, 'utf8')) as {
  client_id: string;
  client_secret: string;
  callback_secret?: string;
};
if (!creds.callback_secret)
  fail(`${clientFile} has no callback_secret: create the client with --callback-secret`);

function fail(why: string): never {
  console.error(`walk-through failed: ${why}`);
  process.exit(1);
}
const must = <T>(step: string, r: { data?: T; error?: unknown; response: Response }): T => {
  if (r.data === undefined || r.error !== undefined)
    fail(`${step}: ${r.response.status} ${JSON.stringify(r.error)}`);
  console.log(`${step}: ${r.response.status}`);
  return r.data;
};

// 1. A receiver for the callbacks, which verifies each before reading it.
const callbacks: CallbackPayload[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    try {
      const p = verifyCallback(Buffer.concat(chunks), req.headers, creds.callback_secret!);
      callbacks.push(p);
      console.log(
        `verified callback ${req.headers['webhook-id']}: ${p.channel} ${p.recipient} ${p.status} attempts=${p.attempts}${p.last_error ? ` (${p.last_error})` : ''}`,
      );
      res.writeHead(204).end();
    } catch (e) {
      if (!(e instanceof CallbackVerificationError)) throw e;
      console.log(`rejected: ${e.message}`);
      res.writeHead(401).end();
    }
  });
});
await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
const callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/callbacks`;

// 2. The client mints its token on the first call (and refreshes it before it expires).
const ens = createEnsClient({
  baseUrl,
  clientId: creds.client_id,
  clientSecret: creds.client_secret,
});

// 3. The tenant: 201 when created, 200 when it was already there.
must(
  'provision tenant acme',
  await ens.api.POST('/v2/tenants', { body: { tenant: 'acme', name: 'Acme Ltd' } }),
);

// 4. One handoff, three channels. The sandbox: 0000 fails, 1111 fails twice then succeeds, 2222 is read.
const reference = `order-1001-${Date.now()}`;
const handoff = {
  tenant: 'acme',
  event_type: 'order.shipped',
  reference,
  callback_url: callbackUrl,
  messages: [
    {
      channel: 'sms' as const,
      recipients: ['+15551230001', '+15551230000', '+15551231111'],
      content: { kind: 'rendered' as const, body: 'Your order 1001 has shipped.' },
    },
    {
      channel: 'email' as const,
      recipients: ['ada@example.com'],
      content: {
        kind: 'rendered' as const,
        subject: 'Shipped',
        body: 'Order 1001 has shipped.',
        html: '<p>Order 1001 has shipped.</p>',
      },
    },
    {
      channel: 'whatsapp' as const,
      recipients: ['+15551232222'],
      content: {
        kind: 'template' as const,
        template_name: 'order_shipped',
        language: 'en',
        body_params: ['1001'],
      },
    },
  ],
};
const key = `${reference}-shipped`;
const first = await ens.send(handoff, key);
const accepted = must('send', first);
console.log(JSON.stringify(accepted, null, 2));

// 5. One verified callback per delivery (the 1111 number waits for two retries).
const until = Date.now() + 60_000;
while (callbacks.length < accepted.deliveries.length) {
  if (Date.now() > until)
    fail(`${callbacks.length} of ${accepted.deliveries.length} callbacks within 60 s`);
  await new Promise((r) => setTimeout(r, 200));
}

// 6. The record.
const page = must(
  'pull deliveries',
  await ens.api.GET('/v2/deliveries', { params: { query: { reference } } }),
);
for (const d of page.results)
  console.log(
    `${d.channel} ${d.recipient} ${d.status} attempts=${d.attempts} delivered_at=${d.delivered_at} read_at=${d.read_at}`,
  );

// 7. The same request with the same key: the original 202 body, nothing sent twice.
const replay = await ens.send(handoff, key);
must('replay', replay);
if (
  replay.response.headers.get('idempotent-replayed') !== 'true' ||
  JSON.stringify(replay.data) !== JSON.stringify(accepted)
)
  fail('the replay did not answer the original body');
console.log('replay: the original 202 body, Idempotent-Replayed: true');

receiver.close();
