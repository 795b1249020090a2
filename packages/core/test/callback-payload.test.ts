import t from 'tap';
import {
  callbackBody,
  callbackSnapshot,
  serialiseCallback,
} from '../src/schemas/callback-payload.ts';
import type { CallbackPayload } from '../src/schemas/delivery.ts';

/*
 * A callback keeps a snapshot of its payload's changing fields, and its body is rebuilt from it
 * and the delivery's unchanging ones at every post (migration 019). The signature covers those
 * bytes, so the rebuilt body must be exactly the one the whole payload serialises to.
 */

const base: CallbackPayload = {
  delivery_id: '01a21d3f-9392-762a-812a-9514c9bf7f92',
  reference: null,
  channel: 'sms',
  recipient: '+15550001234',
  status: 'sent',
  attempts: 1,
  provider_message_id: 'sandbox-01a21d3f-9392-762a-812a-9af130ed592e',
  sent_at: '2026-11-27T13:30:27.123456+00:00',
  delivered_at: null,
  read_at: null,
  last_error: null,
};

const cases: [string, CallbackPayload][] = [
  ['a first-try send', base],
  [
    'a failure with an error that needs escaping, a reference, email',
    {
      ...base,
      reference: 'order "7" — ünïcode \u2028',
      channel: 'email',
      recipient: 'Ann@Example.com',
      status: 'failed',
      attempts: 5,
      provider_message_id: null,
      sent_at: null,
      last_error: 'smtp 550 "mailbox\\unavailable"\n',
    },
  ],
  [
    'a late failure report after delivery and read',
    {
      ...base,
      channel: 'whatsapp',
      status: 'failed',
      delivered_at: '2026-11-27T13:30:28.000001+00:00',
      read_at: '2026-11-27T13:30:29.5+00:00',
      last_error: 'reported failed',
    },
  ],
];

for (const [name, p] of cases)
  t.test(name, async (t) => {
    const snapshot = callbackSnapshot(p);
    const { delivery_id, reference, channel, recipient } = p;
    t.equal(
      callbackBody({ delivery_id, reference, channel, recipient }, snapshot),
      serialiseCallback(p),
      'the rebuilt body is byte for byte the whole payload’s',
    );
    t.ok(
      snapshot.length < serialiseCallback(p).length / 2,
      `the snapshot (${snapshot.length} bytes) is under half the body (${serialiseCallback(p).length})`,
    );
  });

t.test('a snapshot of another shape is refused, not posted', async (t) => {
  const { delivery_id, reference, channel, recipient } = base;
  t.throws(
    () => callbackBody({ delivery_id, reference, channel, recipient }, '["sent",1]'),
    /a callback snapshot of 7 values was expected/,
  );
});
