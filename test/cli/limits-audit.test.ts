import t from 'tap';
import { startTestService } from '../harness/service.ts';
import { bundleEns, ensJson } from '../harness/ens-bundle.ts';

/**
 * `ens clients limits ID` without --rate or --daily-quota only shows the limits: the audit log
 * recorded it as a change (issue 25). A read writes no audit row; a change writes one.
 */

const [svc, run] = await Promise.all([startTestService(t, { roles: ['api'] }), bundleEns(t)]);
const ens = ensJson(run, svc.env);

const limitRows = async (id: string) =>
  (
    await svc.rt.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM audit_log WHERE action = 'client.limits' AND target = $1`,
      [id],
    )
  ).rows[0]!.n;

t.test('showing a client’s limits is not audited as a change; setting them is', async (t) => {
  const c = await svc.createClient();
  const shown = await ens(['clients', 'limits', c.clientId]);
  t.equal(shown.code, 0, shown.stderr);
  t.equal(shown.json?.client_id, c.clientId);
  t.equal(await limitRows(c.clientId), 0, 'a read leaves the audit log alone');
  const set = await ens(['clients', 'limits', c.clientId, '--rate', '50']);
  t.equal(set.code, 0, set.stderr);
  t.equal(set.json?.rate_limit, 50);
  t.equal(await limitRows(c.clientId), 1, 'a change is audited once');
});
