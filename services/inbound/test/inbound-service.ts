import { returnPathFor, unsubscribeMailtoFor } from '@ens/core';
import {
  freePort,
  startTestService,
  uniqueKey,
  waitFor,
  type Teardown,
  type TestClient,
  type TestService,
} from '../../../test/harness/service.ts';

/**
 * ENS with every role, the inbound one listening on a free loopback port, the sandbox sending
 * email; and sent deliveries to report on.
 */

export const DOMAIN = 'bounces.ens-test.invalid';
export const FEEDBACK = 'fbl@bounces.ens-test.invalid';

export interface InboundService {
  svc: TestService;
  client: TestClient;
  /** The inbound role's SMTP port. */
  port: number;
  /**
   * Sends one email (event type `newsletter.weekly` unless given) and resolves with its delivery
   * once sent.
   */
  sentDelivery(recipient: string, eventType?: string): Promise<SentDelivery>;
  row(id: string): Promise<{ status: string; bounced_at: Date | null; complained_at: Date | null }>;
  entries(): Promise<
    {
      address: string;
      reason: string;
      source: string;
      scope: string;
      delivery_id: string | null;
      detail: string | null;
      expires_at: string | null;
    }[]
  >;
}

export interface SentDelivery {
  id: string;
  recipient: string;
  returnPath: string;
  unsubscribeMailto: string;
}

export async function startInboundService(
  t: Teardown,
  env: Record<string, string> = {},
): Promise<InboundService> {
  const port = await freePort();
  const svc = await startTestService(t, {
    env: {
      ENS_RETURN_PATH_DOMAIN: DOMAIN,
      ENS_INBOUND_PORT: String(port),
      ENS_INBOUND_FEEDBACK_ADDRESS: FEEDBACK,
      ...env,
    },
    roles: ['api', 'worker', 'callbacks', 'feed', 'inbound'],
  });
  const client = await svc.createClient();
  await svc.tenant(client, 'acme');
  const row: InboundService['row'] = async (id) =>
    (
      await svc.rt.db.query(
        'SELECT status, bounced_at, complained_at FROM deliveries WHERE id = $1',
        [id],
      )
    ).rows[0];
  return {
    svc,
    client,
    port,
    async sentDelivery(recipient, eventType = 'newsletter.weekly'): Promise<SentDelivery> {
      const r = await svc.send(
        client,
        {
          tenant: 'acme',
          event_type: eventType,
          messages: [
            {
              channel: 'email',
              recipients: [recipient],
              content: { kind: 'rendered', subject: 'This week', body: 'News' },
            },
          ],
        },
        uniqueKey('inbound'),
      );
      if (r.status !== 202) throw new Error(`send: ${r.status} ${r.text}`);
      const id: string = r.body.deliveries[0].delivery_id;
      await waitFor(async () => (await row(id)).status === 'sent', 15_000, `delivery ${id} sent`);
      return {
        id,
        recipient,
        returnPath: returnPathFor(svc.rt.consentKey, DOMAIN, id),
        unsubscribeMailto: unsubscribeMailtoFor(svc.rt.consentKey, DOMAIN, id),
      };
    },
    row,
    async entries() {
      return (await svc.rt.suppressions.list(client.clientId, 'acme', { limit: 1000 }))
        .results as never;
    },
  };
}
