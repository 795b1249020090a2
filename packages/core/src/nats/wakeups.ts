import type { JetStreamClient } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import type { Channel } from '../schemas/channel.ts';
import { CALLBACK_SUBJECT, sendSubject } from './topology.ts';

const IN_FLIGHT = 512;

async function publishAll(js: JetStreamClient, msgs: { subject: string; id: string }[], logger: Logger): Promise<number> {
  let failed = 0;
  for (let i = 0; i < msgs.length; i += IN_FLIGHT) {
    const chunk = msgs.slice(i, i + IN_FLIGHT);
    const results = await Promise.allSettled(chunk.map((m) => js.publish(m.subject, m.id)));
    failed += results.filter((r) => r.status === 'rejected').length;
  }
  // A lost wake-up is not a lost delivery: the sweeper finds overdue rows in PostgreSQL.
  if (failed > 0) logger.warn({ failed, total: msgs.length }, 'some wake-ups were not published; the sweeper will re-enqueue them');
  return msgs.length - failed;
}

/** Wakes the channel workers for these deliveries. Never throws. */
export function wakeSenders(js: JetStreamClient, items: { id: string; channel: Channel }[], logger: Logger): Promise<number> {
  return publishAll(js, items.map((d) => ({ subject: sendSubject(d.channel), id: d.id })), logger);
}

/** Wakes the callbacks role for these callback ids. Never throws. */
export function wakeCallbacks(js: JetStreamClient, ids: string[], logger: Logger): Promise<number> {
  return publishAll(js, ids.map((id) => ({ subject: CALLBACK_SUBJECT, id })), logger);
}
