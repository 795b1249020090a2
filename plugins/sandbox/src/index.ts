import { randomUUID } from 'node:crypto';
import { Type } from 'typebox';
import {
  CHANNELS,
  definePlugin,
  permanentError,
  recipientError,
  transientError,
  type OutboundMessage,
  type PluginContext,
} from '@ens/plugin-sdk';

/**
 * The development provider: no network, and an outcome chosen by the recipient so that every path
 * of the delivery lifecycle can be seen from a terminal (see the README's sandbox table).
 */
type Outcome = 'fail' | 'flaky' | 'handset' | 'ok';

function outcomeFor(m: OutboundMessage): Outcome {
  const r = m.recipient;
  switch (m.channel) {
    case 'sms':
    case 'whatsapp':
      if (r.endsWith('0000')) return 'fail';
      if (r.endsWith('1111')) return 'flaky';
      if (m.channel === 'whatsapp' && r.endsWith('2222')) return 'handset';
      return 'ok';
    case 'email': {
      const local = r.slice(0, r.lastIndexOf('@')).toLowerCase();
      return local === 'fail' ? 'fail' : local === 'flaky' ? 'flaky' : 'ok';
    }
    case 'push':
      return r === 'fail' ? 'fail' : r === 'flaky' ? 'flaky' : 'ok';
  }
}

const Config = Type.Object(
  {
    /** Delay before the simulated handset reports delivered; read follows after the same delay. */
    handsetDelayMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 10_000, default: 400 })),
    /** Simulated provider latency per send, for load and fault tests. */
    sendDelayMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 60_000, default: 0 })),
  },
  { additionalProperties: false },
); // a misspelt setting must stop the start, not be ignored

export default definePlugin<{ handsetDelayMs?: number; sendDelayMs?: number }>({
  name: 'sandbox',
  channels: CHANNELS,
  sdk: '^1.3.0',
  configSchema: Config,
  create(config, context: PluginContext) {
    const delay = config.handsetDelayMs ?? 400;
    const sendDelay = config.sendDelayMs ?? 0;
    const timers = new Set<NodeJS.Timeout>();
    // The handset's reports go through context.reportStatus, the same path the WhatsApp status
    // webhook takes, so sandbox runs exercise the real update code.
    const later = (ms: number, fn: () => Promise<void>) => {
      const t = setTimeout(() => {
        timers.delete(t);
        fn().catch((e: unknown) =>
          context.logger.warn({ err: e }, 'sandbox handset report failed'),
        );
      }, ms);
      timers.add(t);
    };
    return {
      async send(m) {
        if (sendDelay > 0) await new Promise((r) => setTimeout(r, sendDelay));
        const outcome = outcomeFor(m);
        // A refusal about the recipient, as a provider makes for a number or mailbox that does not
        // exist: ENS suppresses the address. A push user id is not an address a provider refuses.
        if (outcome === 'fail') {
          const why = `sandbox: ${m.channel} recipient ${m.recipient} is set up to fail`;
          throw m.channel === 'push'
            ? permanentError(why)
            : recipientError(why, 'invalid_recipient');
        }
        if (outcome === 'flaky' && m.attempt < 3)
          throw transientError(`sandbox: simulated outage on attempt ${m.attempt}`);
        const providerMessageId = `sandbox-${randomUUID()}`;
        if (outcome === 'handset') {
          later(delay, async () => {
            await context.reportStatus({ providerMessageId, status: 'delivered', at: new Date() });
            later(delay, () =>
              context.reportStatus({ providerMessageId, status: 'read', at: new Date() }),
            );
          });
        }
        return { providerMessageId };
      },
      async close() {
        for (const t of timers) clearTimeout(t);
        timers.clear();
      },
    };
  },
});
