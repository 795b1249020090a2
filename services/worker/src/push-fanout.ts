import { classifyError, ProviderError, type OutboundMessage } from '@ens/plugin-sdk';
import type { Runtime } from '@ens/core';
import { devicesRemoved, type AttemptResult, type ClaimedDelivery } from '@ens/core/internal';
import { ChainSendError, type ProviderChain } from './provider-chain.ts';

/** Enough of each device's answer to say what happened, without one long last_error. */
const MAX_ERROR_CHARS = 1000;

const shortToken = (t: string) => (t.length > 16 ? `${t.slice(0, 8)}…${t.slice(-4)}` : t);

/**
 * Sends a push delivery to every device the user has in the registry, each through the provider
 * of its platform. The delivery is sent when at least one device accepted it (its id becomes
 * provider_message_id); devices whose provider says they are gone are removed from the registry.
 * When no device accepted it, the attempt is retried if any device failed for a reason worth
 * retrying, and failed otherwise, with each device's reason in last_error. A retry resends to
 * every device, but only after none accepted, so no device gets the message twice.
 */
export async function sendToDevices(
  rt: Runtime,
  chain: ProviderChain,
  claim: ClaimedDelivery,
  message: OutboundMessage,
  decide: (err: unknown, provider: string) => AttemptResult,
): Promise<AttemptResult> {
  const devices = await rt.devices.list(claim.clientId, claim.tenant, claim.recipient);
  if (devices.length === 0) {
    return {
      outcome: 'failed',
      provider: chain.primary,
      error: `push: user "${claim.recipient}" has no registered devices in tenant "${claim.tenant}"`,
      kind: 'permanent',
    };
  }
  const answers = await Promise.all(
    devices.map(async (d) => {
      try {
        const sent = await chain.send({
          ...message,
          device: { token: d.token, platform: d.platform, subscription: d.subscription },
        });
        return { device: d, sent };
      } catch (e) {
        if (!(e instanceof ChainSendError)) throw e;
        return { device: d, failed: e };
      }
    }),
  );

  for (const a of answers) {
    if (!a.failed || !classifyError(a.failed.causeValue).deviceGone) continue;
    await rt.devices.remove(claim.clientId, claim.tenant, claim.recipient, a.device.token);
    devicesRemoved.inc({ provider: a.failed.provider });
    rt.logger.info(
      { deliveryId: claim.id, provider: a.failed.provider, platform: a.device.platform },
      'push device reported gone; removed from the registry',
    );
  }

  const accepted = answers.find((a) => a.sent);
  if (accepted?.sent)
    return {
      outcome: 'sent',
      provider: accepted.sent.provider,
      providerMessageId: accepted.sent.result.providerMessageId,
    };

  const failures = answers.map((a) => ({
    device: a.device,
    err: a.failed!,
    c: classifyError(a.failed!.causeValue),
  }));
  const summary = failures
    .map(
      (f) =>
        `${f.device.platform} ${shortToken(f.device.token)}: ${f.c.message}${f.c.deviceGone ? ' (removed)' : ''}`,
    )
    .join('; ');
  const text =
    `push to ${devices.length} device${devices.length === 1 ? '' : 's'} failed: ${summary}`.slice(
      0,
      MAX_ERROR_CHARS,
    );
  // The retry follows the most hopeful failure: a rate limit's hint, then any transient one.
  const retryable =
    failures.find((f) => f.c.kind === 'rate_limited') ??
    failures.find((f) => f.c.kind === 'transient');
  const basis = retryable ?? failures[0]!;
  return decide(
    new ProviderError(basis.c.kind, text, { retryAfterMs: basis.c.retryAfterMs }),
    basis.err.provider,
  );
}
