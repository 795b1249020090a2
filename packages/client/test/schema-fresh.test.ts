import { readFile } from 'node:fs/promises';
import t from 'tap';
import { startTestService } from '../../../test/harness/service.ts';
import { schemaSource } from '../scripts/schema-source.ts';

/**
 * src/schema.d.ts is what openapi-typescript makes of the live document today: a route schema
 * that changes without `npm run generate -w @ens/client` fails here instead of drifting.
 */
t.test('the committed schema.d.ts equals a fresh generation from the live document', async (t) => {
  const svc = await startTestService(t);
  const doc = (await (await fetch(`${svc.baseUrl}/docs/json`)).json()) as object;
  const committed = await readFile(new URL('../src/schema.d.ts', import.meta.url), 'utf8');
  const fresh = await schemaSource(doc);
  t.ok(fresh.includes('"/v2/messages"'), 'the generation has the API');
  t.equal(
    committed,
    fresh,
    'src/schema.d.ts is current (regenerate with `npm run generate -w @ens/client -- <ENS URL>`)',
  );
});
