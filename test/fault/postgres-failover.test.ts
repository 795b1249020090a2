import { execFileSync } from 'node:child_process';
import t from 'tap';
import { multiHostUrl, startStandby, type Standby } from '../harness/pg-standby.ts';
import { smsHandoff, startTestService, uniqueKey, waitFor } from '../harness/service.ts';

/*
 * A PostgreSQL failover under a steady flow of handoffs, as a platform team's pair does it
 * (Patroni, CloudNativePG, pg_auto_failover): a primary and a streaming standby made with
 * pg_basebackup on loopback, ENS on libpq's multi-host URL with target_session_attrs=read-write,
 * the primary's machine lost (its server and backends killed with -9), and a second later (a
 * failover manager's detection) the standby promoted with pg_ctl promote. ENS is not restarted.
 *
 * Synchronous replication (synchronous_standby_names, synchronous_commit on): nothing a 202
 * answered is lost, nothing is stranded, nothing succeeds twice. Asynchronous: what is lost is
 * counted (202'd handoffs missing on the promoted standby) and printed, not asserted; the rest
 * holds for what the standby has. Both print the time from the promotion to the first 202 and to
 * the first send. docs/guides/operating.md ("A PostgreSQL failover") records the figures.
 */

const FLOW_BEFORE_KILL_MS = 2_000;
/**
 * ENS_TEST_REPLICATION_LAG_MS=500: the standby that far behind when the primary dies (its WAL
 * sender stopped that long before the kill, as a slow link or a busy standby would), for what
 * asynchronous replication loses then. Unset: loopback, where the standby is a few ms behind.
 */
const REPLICATION_LAG_MS = Number(process.env.ENS_TEST_REPLICATION_LAG_MS ?? 0);
/** The primary dead, the standby not yet promoted: a failover manager noticing. */
const DETECTION_MS = 1_000;
const FLOW_AFTER_PROMOTION_MS = 4_000;
const CLIENT_TIMEOUT_MS = 10_000;

/** The processes whose parent is `pid` (a postmaster's backends, WAL sender and helpers). */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

interface Outcome {
  key: string;
  body: Record<string, unknown>;
  status: number;
  /** Date.now() when the request was sent and when its answer came. */
  sentAt: number;
  answeredAt: number;
  handoffId?: string;
}

for (const synchronous of [true, false]) {
  const mode = synchronous ? 'synchronous' : 'asynchronous';
  t.test(
    `failover to ${synchronous ? 'a' : 'an'} ${mode} standby under a flow of handoffs`,
    async (t) => {
      let standby: Standby | undefined;
      const svc = await startTestService(t, {
        // A short lease and grace: a send cut off by the failover is retried in seconds.
        env: { ENS_SWEEP_GRACE: '500ms', ENS_LEASE: '3s' },
        databaseUrl: async (engines) => {
          standby = await startStandby(t, engines.postgres, { synchronous });
          return multiHostUrl(
            engines.postgres.url,
            [engines.postgres.port, standby.handle.port],
            'read-write',
          );
        },
      });
      const client = await svc.createClient();
      await svc.tenant(client, 'acme');
      const token = await client.token();

      const outcomes: Outcome[] = [];
      let flowing = true;
      const lane = async (n: number) => {
        for (let i = 0; flowing; i++) {
          const key = uniqueKey(`failover-${n}-${i}`);
          const body = smsHandoff('acme', [
            `+1555${String(n).padStart(2, '0')}${String(i).padStart(5, '0')}`,
            `+1556${String(n).padStart(2, '0')}${String(i).padStart(5, '0')}`,
          ]);
          const sentAt = Date.now();
          let status = -1;
          let handoffId: string | undefined;
          try {
            const res = await fetch(`${svc.baseUrl}/v2/messages`, {
              method: 'POST',
              headers: {
                authorization: `Bearer ${token}`,
                'content-type': 'application/json',
                'idempotency-key': key,
              },
              body: JSON.stringify(body),
              signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
            });
            status = res.status;
            handoffId = ((await res.json()) as { handoff_id?: string }).handoff_id;
          } catch {
            // timed out or refused: counted as not accepted, and sent again below with its key
          }
          outcomes.push({ key, body, status, sentAt, answeredAt: Date.now(), handoffId });
          if (status !== 202) await new Promise((r) => setTimeout(r, 100));
        }
      };
      const lanes = [0, 1, 2, 3].map(lane);
      await new Promise((r) => setTimeout(r, FLOW_BEFORE_KILL_MS - REPLICATION_LAG_MS));
      if (REPLICATION_LAG_MS > 0) await standby!.holdReplication();
      await new Promise((r) => setTimeout(r, REPLICATION_LAG_MS));
      // The primary's machine dies: the server and every backend at once, so that no backend left
      // running commits after the kill (a postmaster killed alone leaves its backends to finish).
      const postmaster = svc.engines.postgres.pid!;
      const backends = childrenOf(postmaster);
      const killedAt = Date.now();
      for (const pid of [postmaster, ...backends]) killQuietly(pid);
      await svc.engines.postgres.kill9();
      await new Promise((r) => setTimeout(r, DETECTION_MS));
      const promotedAt = Date.now();
      await standby!.promote();
      const promotionMs = Date.now() - promotedAt;
      await new Promise((r) => setTimeout(r, FLOW_AFTER_PROMOTION_MS));
      flowing = false;
      await Promise.all(lanes);

      const accepted = outcomes.filter((o) => o.status === 202);
      const refused = outcomes.filter((o) => o.status !== 202);
      const firstAfter = accepted.filter((o) => o.sentAt >= killedAt).map((o) => o.answeredAt);
      t.same(
        firstAfter.filter((at) => at < promotedAt),
        [],
        'nothing sent after the kill is accepted before the promotion',
      );
      t.ok(firstAfter.length > 0, 'handoffs are accepted again after the promotion');
      const first202Ms = Math.min(...firstAfter) - promotedAt;
      t.ok(
        refused.length > 0,
        `${refused.length} of ${outcomes.length} refused during the failover`,
      );
      t.same(
        refused.filter((o) => o.status !== 503 && o.status !== -1).map((o) => o.status),
        [],
        'every refusal is a 503 (or no answer), never a 500',
      );

      // What the promoted standby has of what was answered 202: one query by handoff id.
      const db = svc.rt.db;
      const ids = accepted.map((o) => o.handoffId!);
      const present = new Map(
        (
          await db.query<{ id: string; n: number }>(
            `SELECT h.id::text, (SELECT count(*)::int FROM deliveries d WHERE d.handoff_id = h.id) AS n
             FROM handoffs h WHERE h.id = ANY($1::uuid[])`,
            [ids],
          )
        ).rows.map((r) => [r.id, r.n]),
      );
      const lost = accepted.filter((o) => !present.has(o.handoffId!));
      const short = accepted.filter(
        (o) => present.has(o.handoffId!) && present.get(o.handoffId!) !== 2,
      );
      t.same(
        short.map((o) => o.key),
        [],
        'every 202 handoff there has both its deliveries',
      );
      if (synchronous)
        t.same(
          lost.map((o) => o.key),
          [],
          'no 202 handoff is lost: 202 means on both servers',
        );

      // The refused ones again, with their keys, as a careful caller does: each accepted once.
      const again: number[] = [];
      for (const o of refused) {
        const r = await waitFor(
          async () => {
            const res = await svc.send(client, o.body, o.key);
            return res.status === 202 ? res : null;
          },
          CLIENT_TIMEOUT_MS,
          `the refused handoff ${o.key} accepted when sent again`,
        );
        again.push(r.status);
      }
      t.same(
        again.filter((s) => s !== 202),
        [],
        'every refused handoff, sent again with its key, is accepted',
      );

      const count = async (sql: string) => Number((await db.query<{ n: string }>(sql)).rows[0]!.n);
      await waitFor(
        async () =>
          (await count(`SELECT count(*) AS n FROM deliveries WHERE status = 'pending'`)) === 0,
        30_000,
        'every delivery to end',
      );
      t.pass('stranded: 0 (every delivery on the promoted standby ended)');
      t.equal(
        await count(
          `SELECT count(*) AS n FROM (SELECT delivery_id FROM attempts WHERE outcome = 'sent'
           GROUP BY delivery_id HAVING count(*) > 1) x`,
        ),
        0,
        'double successes: 0',
      );
      const firstSendMs =
        Number(
          (
            await db.query<{ ms: string | null }>(
              `SELECT extract(epoch FROM min(started_at)) * 1000 AS ms FROM attempts
              WHERE outcome = 'sent' AND started_at >= to_timestamp($1::float8 / 1000)`,
              [promotedAt],
            )
          ).rows[0]!.ms,
        ) - promotedAt;
      t.ok(firstSendMs >= 0, 'a send after the promotion');
      const lostClaims = await count(`SELECT count(*) AS n FROM attempts WHERE outcome = 'lost'`);
      t.comment(
        `${mode}, standby ${REPLICATION_LAG_MS ? `${REPLICATION_LAG_MS} ms` : 'not held'} behind: ${accepted.length} handoffs answered 202 (${refused.length} refused, then accepted ` +
          `with their keys); lost after the promotion: ${lost.length}; pg_ctl promote took ` +
          `${promotionMs} ms; from the promotion: first 202 at ${first202Ms} ms, first send at ` +
          `${Math.round(firstSendMs)} ms; attempts cut off (sent again): ${lostClaims}`,
      );
    },
  );
}
