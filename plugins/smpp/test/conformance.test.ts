import t from 'tap';
import { conformanceTest } from '@ens/plugin-sdk/conformance';
import fixture from '../src/conformance.ts';

t.test('conformance kit', async (t) => {
  await conformanceTest(t, '@ens/plugin-smpp', await import('../src/index.ts'), fixture);
});
