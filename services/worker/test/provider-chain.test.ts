import t from 'tap';
import { pino } from 'pino';
import {
  classifyError,
  permanentError,
  transientError,
  type OutboundMessage,
  type Provider,
  type PushPlatform,
} from '@ens/plugin-sdk';
import { ChainSendError, ProviderChain, type LoadedProvider } from '@ens/service-worker';

/**
 * Fail-over between a channel's providers: transient failures past the threshold take a provider
 * out, sends go to the next, and one trial send after the cool-down brings it back.
 */

const message: OutboundMessage = {
  deliveryId: '0190a0b0-0000-7000-8000-000000000001',
  attempt: 1,
  channel: 'sms',
  recipient: '+15550100',
  tenant: 't',
  tenantSettings: {},
  eventType: 'e',
  reference: null,
  content: { body: 'hi' },
};

/** A provider whose health the test switches; it counts the sends it was asked for. */
function fakeProvider(name: string, pushPlatforms: readonly PushPlatform[] | null = null) {
  const state = { mode: 'up' as 'up' | 'down' | 'refuses', calls: 0 };
  const provider: Provider = {
    async send() {
      state.calls++;
      if (state.mode === 'down') throw transientError(`${name}: 503 service unavailable`);
      if (state.mode === 'refuses') throw permanentError(`${name}: invalid number`);
      return { providerMessageId: `${name}-${state.calls}` };
    },
  };
  const loaded: LoadedProvider = { name, pkg: `@test/${name}`, provider, pushPlatforms };
  return { loaded, state };
}

const logger = pino({ level: 'silent' });
const options = (cooldownMs = 200) => ({ threshold: 4, cooldownMs, sendTimeoutMs: 1_000, logger });

async function sendVia(chain: ProviderChain, m: OutboundMessage = message): Promise<string> {
  try {
    return (await chain.send(m)).provider;
  } catch (e) {
    if (e instanceof ChainSendError) return `${e.provider}!${classifyError(e.causeValue).kind}`;
    throw e;
  }
}

t.test(
  'a failing provider is taken out after the threshold and comes back after a good trial send',
  async (t) => {
    const a = fakeProvider('alpha');
    const b = fakeProvider('beta');
    const chain = new ProviderChain('sms', [a.loaded, b.loaded], options());
    t.teardown(() => chain.close());

    t.equal(await sendVia(chain), 'alpha', 'the first provider sends while it is up');
    a.state.mode = 'down';
    const during = [];
    for (let i = 0; i < 6; i++) during.push(await sendVia(chain));
    t.same(
      during.slice(0, 3),
      ['alpha!transient', 'alpha!transient', 'alpha!transient'],
      'failures below the threshold stay with alpha and are transient',
    );
    t.same(during.slice(4), ['beta', 'beta'], 'once out, sends go to beta');
    t.same(chain.down(), ['alpha']);
    const alphaCalls = a.state.calls;

    await new Promise((r) => setTimeout(r, 250));
    t.equal(
      await sendVia(chain),
      'alpha!transient',
      'after the cool-down one trial goes to alpha, which is still down',
    );
    t.equal(a.state.calls, alphaCalls + 1);
    t.equal(await sendVia(chain), 'beta', 'and alpha is out again');

    a.state.mode = 'up';
    await new Promise((r) => setTimeout(r, 250));
    t.equal(await sendVia(chain), 'alpha', 'a good trial send brings alpha back');
    t.equal(await sendVia(chain), 'alpha');
    t.same(chain.down(), []);
  },
);

t.test('permanent refusals mean the provider is up: no fail-over', async (t) => {
  const a = fakeProvider('alpha');
  const b = fakeProvider('beta');
  const chain = new ProviderChain('sms', [a.loaded, b.loaded], options());
  t.teardown(() => chain.close());
  a.state.mode = 'refuses';
  for (let i = 0; i < 10; i++) t.equal(await sendVia(chain), 'alpha!permanent');
  t.equal(b.state.calls, 0, 'beta was never asked');
});

t.test('when every provider is out, the first is still asked', async (t) => {
  const a = fakeProvider('alpha');
  const b = fakeProvider('beta');
  const chain = new ProviderChain('sms', [a.loaded, b.loaded], options(60_000));
  t.teardown(() => chain.close());
  a.state.mode = 'down';
  b.state.mode = 'down';
  for (let i = 0; i < 12; i++) await sendVia(chain);
  t.same(chain.down().sort(), ['alpha', 'beta']);
  const before = a.state.calls;
  t.equal(
    await sendVia(chain),
    'alpha!transient',
    'the send is tried on alpha rather than failed untried',
  );
  t.equal(a.state.calls, before + 1);
});

t.test('a single provider has no breaker: every send reaches it', async (t) => {
  const a = fakeProvider('alpha');
  const chain = new ProviderChain('sms', [a.loaded], options());
  t.teardown(() => chain.close());
  a.state.mode = 'down';
  for (let i = 0; i < 10; i++) await sendVia(chain);
  t.equal(a.state.calls, 10);
});

t.test('a provider that does not answer within the send timeout failed transiently', async (t) => {
  const hang: LoadedProvider = {
    name: 'slow',
    pkg: '@test/slow',
    pushPlatforms: null,
    provider: { send: () => new Promise(() => {}) },
  };
  const chain = new ProviderChain('sms', [hang], { ...options(), sendTimeoutMs: 50 });
  t.teardown(() => chain.close());
  const err = await chain.send(message).catch((e: unknown) => e);
  t.ok(err instanceof ChainSendError);
  t.match(classifyError((err as ChainSendError).causeValue), {
    kind: 'transient',
    message: /did not answer within 50 ms/,
  });
});

t.test('push devices go to the provider of their platform', async (t) => {
  const fcm = fakeProvider('fcm', ['fcm']);
  const apns = fakeProvider('apns', ['apns']);
  const chain = new ProviderChain('push', [fcm.loaded, apns.loaded], options());
  t.teardown(() => chain.close());
  t.ok(chain.sendsToDevices);
  const push = (platform: PushPlatform): OutboundMessage => ({
    ...message,
    channel: 'push',
    device: { token: 'x', platform, subscription: null },
  });
  t.equal(await sendVia(chain, push('apns')), 'apns');
  t.equal(await sendVia(chain, push('fcm')), 'fcm');
  const err = await chain.send(push('webpush')).catch((e: unknown) => e);
  t.match(classifyError((err as ChainSendError).causeValue), {
    kind: 'permanent',
    message: /no provider for webpush devices/,
  });
});
