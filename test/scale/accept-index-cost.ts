import { createLogger, loadConfig, migrate, newId, openRuntime, acceptHandoff } from '@ens/core';
import { startTestEngines } from '../harness/engines.ts';
import { progress } from '../bench/log.ts';

/*
 * What the three indexes migration 008 puts on deliveries cost the accept path
 * (`node --conditions=ens-source --import=tsx test/scale/accept-index-cost.ts`): ACCEPTS
 * one-recipient sms handoffs through acceptHandoff (the API's own batched write, 64 in flight)
 * with the indexes, then again with them dropped, alternating ROUNDS times on the same growing
 * table, so both sides see the same machine load. Only PostgreSQL's side: no HTTP, no NATS.
 */
const ACCEPTS = Number(process.env.ACCEPTS ?? 20_000);
const ROUNDS = Number(process.env.ROUNDS ?? 6);
const engines = await startTestEngines();
const config = loadConfig({
  DATABASE_URL: engines.databaseUrl,
  NATS_URL: engines.natsUrl,
  ENS_DATA_DIR: `${engines.dir}/ens`,
  ENS_LOG_LEVEL: 'warn',
});
const rt = await openRuntime(
  config,
  { databaseUrl: engines.databaseUrl, natsUrl: engines.natsUrl },
  createLogger(config),
);
const { db } = rt;
await migrate(db);
const c = await rt.clients.create('idx', false);
await db.query(`INSERT INTO tenants (client_id, id) VALUES ($1, 'idx')`, [c.client_id]);
let seq = 0;
async function run(): Promise<number> {
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next < ACCEPTS) {
        next++;
        const n = ++seq;
        await acceptHandoff(db, {
          clientId: c.client_id,
          idempotencyKey: `k-${n}`,
          requestHash: 'h',
          responseBody: '{}',
          handoffId: newId(),
          tenant: 'idx',
          eventType: 'idx.event',
          reference: `ref-${n}`,
          callbackUrl: null,
          messages: { sms: { kind: 'rendered', body: 'hi' } },
          deliveries: [
            {
              id: newId(),
              channel: 'sms',
              recipient: `+1555${String(n % 10_000_000).padStart(7, '0')}`,
            },
          ],
          quota: () => 0,
        });
      }
    }),
  );
  return ACCEPTS / ((performance.now() - t0) / 1000);
}
const DROP = 'DROP INDEX deliveries_handoff, deliveries_recipient, deliveries_reference_id';
const CREATE = `CREATE INDEX deliveries_handoff ON deliveries (handoff_id); CREATE INDEX deliveries_recipient ON deliveries (recipient, id);
  CREATE INDEX deliveries_reference_id ON deliveries (reference, id) WHERE reference IS NOT NULL`;
await run(); // warm-up
const out = { with: [] as number[], without: [] as number[] };
// In turn with-then-without and without-then-with, so the table's growth during the run (each
// round is slower than the one before) weighs on both sides alike.
for (let r = 0; r < ROUNDS; r++) {
  if (r % 2 === 0) {
    out.with.push(await run());
    await db.query(DROP);
    out.without.push(await run());
  } else {
    out.without.push(await run());
    await db.query(CREATE);
    out.with.push(await run());
  }
  progress(
    `round ${r + 1}: with ${out.with.at(-1)!.toFixed(0)}/s, without ${out.without.at(-1)!.toFixed(0)}/s`,
  );
}
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
const sum = (v: number[]) => v.reduce((a, b) => a + b, 0);
process.stdout.write(
  `with / without, all rounds: ${(sum(out.with) / sum(out.without)).toFixed(3)}\n`,
);
process.stdout.write(
  `accepts/s with the 008 indexes: median ${median(out.with).toFixed(0)} (${out.with.map((v) => v.toFixed(0)).join(', ')})\n`,
);
process.stdout.write(
  `accepts/s without them:         median ${median(out.without).toFixed(0)} (${out.without.map((v) => v.toFixed(0)).join(', ')})\n`,
);
await rt.close();
await engines.stop();
