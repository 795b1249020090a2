import { checkConfig, classifyError, type OutboundMessage, type Provider } from '@ens/plugin-sdk';
import { recordingContext, type RecordingContext } from '@ens/plugin-sdk/conformance';
import plugin from '../src/index.ts';
import type { FcmConfig } from '../src/config.ts';

export { pushTo } from '../src/conformance.ts';

/** Creates the provider the way ENS does: the schema's defaults filled in, then create(). */
export async function provider(config: FcmConfig): Promise<{ p: Provider; ctx: RecordingContext }> {
  const ctx = recordingContext();
  const p = await plugin.create(checkConfig('@ens/plugin-fcm', plugin, config) as FcmConfig, ctx);
  return { p, ctx };
}

/** The classification of what a send threw (or 'resolved' when it did not throw). */
export async function failureOf(p: Provider, m: OutboundMessage) {
  try {
    const r = await p.send(m);
    return { resolved: r } as const;
  } catch (e) {
    return { ...classifyError(e), raw: e } as const;
  }
}
