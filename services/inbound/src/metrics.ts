import { Counter } from 'prom-client';
import { metricsRegistry } from '@ens/core';

/** Every message the inbound role received after DATA, by what became of it. */
export const inboundMessages = new Counter({
  name: 'ens_inbound_messages_total',
  help:
    'Messages received by the inbound role by result: hard_bounce, soft_bounce, complaint, ' +
    'opt_out (acted on); not_report, malformed, not_actionable, unknown_delivery, too_large, ' +
    'error (refused, nothing recorded)',
  labelNames: ['result'],
  registers: [metricsRegistry],
});

/** Refusals before DATA: a peer over its limits, an address that is no signed return path. */
export const inboundRefusals = new Counter({
  name: 'ens_inbound_refusals_total',
  help:
    'SMTP commands the inbound role refused before any message, by stage (connect, mail, rcpt) ' +
    'and reason (rate_limited, too_many_connections, unknown_recipient, too_many_recipients)',
  labelNames: ['stage', 'reason'],
  registers: [metricsRegistry],
});
