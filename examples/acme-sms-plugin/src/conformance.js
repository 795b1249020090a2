// The fixture `npx ens-plugin-check .` runs this plugin against: a local server that answers like
// the Acme API, and one send per outcome.
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';

const message = (recipient) => ({
  deliveryId: '0190a0b0-0000-7000-8000-00000000acme',
  attempt: 1,
  channel: 'sms',
  recipient,
  tenant: 'example',
  tenantSettings: {},
  eventType: 'example',
  reference: null,
  content: { body: 'Your code is 123456' },
});

export default {
  async start() {
    let next = 0;
    const server = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const answer = (status, body, headers = {}) => {
          res.writeHead(status, { 'content-type': 'application/json', ...headers });
          res.end(JSON.stringify(body));
        };
        if (req.headers.authorization !== 'Bearer test-key')
          return answer(401, { error: { code: 'unauthorized', message: 'bad API key' } });
        const { to } = JSON.parse(Buffer.concat(chunks).toString());
        if (to.endsWith('0000'))
          return answer(400, {
            error: { code: 'invalid_number', message: `${to} is not a mobile number` },
          });
        if (to.endsWith('5030'))
          return answer(503, { error: { code: 'unavailable', message: 'try again' } });
        if (to.endsWith('4290'))
          return answer(
            429,
            { error: { code: 'throttled', message: 'slow down' } },
            { 'retry-after': '2' },
          );
        return answer(201, { id: `msg_${++next}` });
      });
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const baseUrl = `http://127.0.0.1:${server.address().port}`;
    const secret = 'example-webhook-secret';
    const signed = (body) => ({
      'x-acme-signature': createHmac('sha256', secret).update(body).digest('hex'),
      'content-type': 'application/json',
    });
    return {
      config: { apiKey: 'test-key', from: 'ACME', webhookSecret: secret, baseUrl },
      invalidConfig: { apiKey: 'test-key', from: 'A-SENDER-ID-TOO-LONG', webhookSecret: secret },
      sends: {
        accepted: message('+4915112345678'),
        permanent: message('+4915110000000'),
        transient: message('+4915110005030'),
        rateLimited: message('+4915110004290'),
      },
      rateLimitHintMs: 2000,
      webhooks(id) {
        const delivered = JSON.stringify({ id, status: 'delivered', at: '2026-11-22T10:00:00Z' });
        return {
          genuine: [
            {
              method: 'POST',
              path: '/status',
              headers: signed(delivered),
              body: delivered,
              report: { status: 'delivered' },
            },
          ],
          forged: [
            {
              method: 'POST',
              path: '/status',
              headers: { 'x-acme-signature': 'ab'.repeat(32) },
              body: delivered,
            },
          ],
        };
      },
      stop: () => new Promise((resolve) => server.close(resolve)),
    };
  },
};
