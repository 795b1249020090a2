import t from 'tap';
import { smsHandoff, startTestService, waitFor } from '../harness/service.ts';
import { bundleEns, ensJson } from '../harness/ens-bundle.ts';

/**
 * `ens clients consent`: the operator shows and sets a client's consent policy (which reasons stop
 * a send, which event types are bulk or must be delivered), run as a separate process against the
 * database of a running service, which follows the change at once.
 */

const [svc, run] = await Promise.all([startTestService(t), bundleEns(t)]);
/** Runs `ens …`; with `json`, stdout must be one JSON document. */
const ens = ensJson(run, svc.env);

t.test(
  'clients consent shows and sets the policy; the running send path follows it at once',
  async (t) => {
    const c = await svc.createClient();
    await svc.tenant(c, 'shop');
    const shown = await ens(['clients', 'consent', c.clientId]);
    t.equal(shown.code, 0, shown.stderr);
    t.same(shown.json, {
      client_id: c.clientId,
      suppression_reasons: [
        'hard_bounce',
        'soft_bounce',
        'complaint',
        'opt_out',
        'invalid_recipient',
        'manual',
      ],
      bulk_event_types: [],
      must_deliver_event_types: [],
    });

    const set = await ens([
      'clients',
      'consent',
      c.clientId,
      '--reasons',
      'hard_bounce,complaint,opt_out',
      '--bulk-event-types',
      'newsletter.weekly,promo',
      '--must-deliver-event-types',
      'password.reset',
    ]);
    t.equal(set.code, 0, set.stderr);
    t.same(set.json, {
      client_id: c.clientId,
      suppression_reasons: ['hard_bounce', 'complaint', 'opt_out'],
      bulk_event_types: ['newsletter.weekly', 'promo'],
      must_deliver_event_types: ['password.reset'],
    });
    const partly = await ens(['clients', 'consent', c.clientId, '--bulk-event-types', 'none']);
    t.same(partly.json.bulk_event_types, [], 'none clears a list');
    t.same(
      partly.json.suppression_reasons,
      ['hard_bounce', 'complaint', 'opt_out'],
      'what was not named is kept',
    );

    // manual is no longer a reason that stops this client's sends.
    await svc.rt.suppressions.upsert(c.clientId, [
      { tenant: 'shop', channel: 'sms', address: '+15557001234', reason: 'manual', source: 'api' },
    ]);
    const sent = await svc.send(c, smsHandoff('shop', ['+15557001234']));
    const id = sent.body.deliveries[0].delivery_id;
    const row = await waitFor(
      async () => (await svc.feed(c)).find((d) => d.delivery_id === id && d.status !== 'pending'),
      15_000,
      'the send to end',
    );
    t.equal(row.status, 'sent', 'a manual entry no longer stops a send');

    const before = JSON.stringify((await ens(['clients', 'consent', c.clientId])).json);
    const badReason = await ens([
      'clients',
      'consent',
      c.clientId,
      '--reasons',
      'hard_bounce,bored',
    ]);
    t.equal(badReason.code, 1);
    t.match(badReason.stderr, /--reasons: "bored" is not a suppression reason/);
    const badType = await ens([
      'clients',
      'consent',
      c.clientId,
      '--bulk-event-types',
      'news letter',
    ]);
    t.equal(badType.code, 1);
    t.equal(
      JSON.stringify((await ens(['clients', 'consent', c.clientId])).json),
      before,
      'nothing changed',
    );
    const unknown = await ens(['clients', 'consent', 'no-such-client']);
    t.equal(unknown.code, 1);
    t.match(unknown.stderr, /no client with id no-such-client/);
  },
);
