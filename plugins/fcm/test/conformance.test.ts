import t from 'tap';
import { conformanceTest } from '@ens/plugin-sdk/conformance';
import fixture from '../src/conformance.ts';

t.test('conformance kit', async (t) =>
  conformanceTest(t, '@ens/plugin-fcm', await import('../src/index.ts'), fixture),
);
