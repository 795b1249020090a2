/*
 * Accepts a batch of handoffs in one statement, so one transaction and one commit serve them all.
 * p_items is a JSON array with one object per handoff:
 *   client_id, key, request_hash, response  the idempotency key and the 202 body to store with it
 *   handoff_id, tenant, event_type, reference, callback_url, messages  the handoff
 *   deliveries  [{id, channel, recipient}], in the handoff's order
 *   quotas      [{channel, count, quota}]: one per channel that has a daily quota (> 0), in the
 *               order the refusal reports; count is the item's deliveries on that channel
 *   media_refs  [{key, delivery_id}], only when the handoff has inline images: which of its
 *               deliveries use which media object
 *   traceparent the W3C traceparent of the accept's span, only when the accept was traced
 * Returns one row per item, in item order, with its outcome:
 *   created  stored
 *   replay   (client, key) was already used: the stored response and request hash
 *   tenant   the tenant is not provisioned for the client: nothing stored for the item
 *   quota    a daily quota would be exceeded: nothing stored; channel and quota say which
 *   retry    the key's row is gone: an earlier item of the batch with the same key was refused,
 *            or a purge removed it while this batch waited; send the item again
 * Each item is decided with plain checks (no EXCEPTION block, which would cost a subtransaction
 * per item). A refused item's key is claimed first, like every key, so that a concurrent duplicate
 * waits for this transaction, and deleted again before the commit. A later item with the same
 * (client, key) as an earlier one in the batch is its replay. Locks are taken in one global order
 * (keys sorted, then tenant rows sorted, then quota locks sorted), so concurrent batches cannot
 * deadlock.
 */
CREATE OR REPLACE FUNCTION ens_accept_batch(p_items jsonb)
RETURNS TABLE (outcome text, stored_response text, stored_hash text, over_channel text, over_quota int)
LANGUAGE plpgsql
-- Plan each statement once per session: the plans do not depend on the items (every table is
-- reached by its key), and planning them again on every call cost more than running them.
SET plan_cache_mode = force_generic_plan
-- ...and plan them as lookups by key, as the hot statements are (see BY_IDS_SETTINGS in pool.ts):
-- a session keeps what it planned at its first accept, and planned on an empty record the step-5
-- lookup hashed the whole of idempotency_keys for every batch until the next ANALYZE
-- (packages/core/test/hot-statement-plans.test.ts; PostgreSQL's time per accept on a new record
-- was 2-3x its time on a grown one). Deliveries have no foreign key to their handoff (migration
-- 023): the handoff is inserted just before them, in this function.
SET enable_seqscan = off
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
DECLARE
  n         int := jsonb_array_length(p_items);
  today     date := (now() AT TIME ZONE 'UTC')::date;
  -- The fields every step reads, by item position (1-based); the rest is read where it is used.
  clients   text[];
  keys      text[];
  hashes    text[];
  responses text[];
  tenants   text[];
  state     text[];
  over_ch   text[] := array_fill(NULL::text, ARRAY[n]);
  over_lim  int[] := array_fill(NULL::int, ARRAY[n]);
  q         record;
  ch        text;
  lim       int;
BEGIN
  SELECT array_agg(x.client_id ORDER BY x.i), array_agg(x.key ORDER BY x.i), array_agg(x.request_hash ORDER BY x.i),
         array_agg(x.response ORDER BY x.i), array_agg(x.tenant ORDER BY x.i)
    INTO clients, keys, hashes, responses, tenants
    FROM ROWS FROM (jsonb_to_recordset(p_items) AS (client_id text, key text, request_hash text, response text, tenant text))
         WITH ORDINALITY AS x(client_id, key, request_hash, response, tenant, i);

  -- 1. Claim the keys. A key held by a concurrent transaction makes this wait for its outcome.
  WITH ins AS (
    INSERT INTO idempotency_keys (client_id, key, request_hash, response)
    SELECT c, k, hashes[i::int], responses[i::int] FROM unnest(clients, keys) WITH ORDINALITY AS u(c, k, i)
     ORDER BY c, k, i
    ON CONFLICT DO NOTHING
    RETURNING client_id, key)
  SELECT array_agg(CASE WHEN ins.key IS NOT NULL AND u.first THEN 'created' ELSE 'replay' END ORDER BY u.i) INTO state
    FROM (SELECT c, k, i, row_number() OVER (PARTITION BY c, k ORDER BY i) = 1 AS first
            FROM unnest(clients, keys) WITH ORDINALITY AS u(c, k, i)) u
    LEFT JOIN ins ON ins.client_id = u.c AND ins.key = u.k;

  -- A replay's 202 must be as durable as the first one (issue 26). The stored key may come from a
  -- commit that is on this server only: its wait for a synchronous standby was cut off (a restart,
  -- a terminated backend), so its caller got no answer and sent it again. A transaction that only
  -- read commits without waiting for any standby, and so does one that only took an xid (its
  -- commit waits only if it wrote WAL before). A transactional logical message is the smallest
  -- write there is (one WAL record, no table touched; ignored below wal_level logical): with it
  -- the commit writes a record after the key's and waits until the standby has it, as a first
  -- accept waits. A batch that creates anything waits already; only batches of replays alone
  -- pay this, and a first accept pays nothing.
  IF 'replay' = ANY (state) THEN
    PERFORM pg_logical_emit_message(true, 'ens.replay', '');
  END IF;

  -- 2. Tenants: lock the rows the new handoffs will refer to (as their foreign key would), so a
  --    tenant deleted meanwhile refuses its items instead of failing the batch.
  SELECT array_agg(CASE WHEN u.s = 'created' AND t.id IS NULL THEN 'tenant' ELSE u.s END ORDER BY u.i) INTO state
    FROM unnest(state, clients, tenants) WITH ORDINALITY AS u(s, c, tn, i)
    LEFT JOIN (SELECT t.client_id, t.id FROM tenants t
                 JOIN (SELECT DISTINCT c, tn FROM unnest(state, clients, tenants) AS v(s, c, tn) WHERE s = 'created') v
                   ON t.client_id = v.c AND t.id = v.tn
                ORDER BY t.client_id, t.id
                  FOR KEY SHARE OF t) t ON t.client_id = u.c AND t.id = u.tn;

  -- 3. Daily quotas. Lock every (client, channel) concerned, in one order, then take the items in
  --    order: one fits when each of its channels has room; only then is its usage counted.
  IF EXISTS (SELECT FROM jsonb_to_recordset(p_items) AS x(quotas jsonb) WHERE jsonb_array_length(x.quotas) > 0) THEN
    PERFORM pg_advisory_xact_lock(l.h)
       FROM (SELECT DISTINCT hashtext(clients[x.i] || '/' || v.channel) AS h
               FROM ROWS FROM (jsonb_to_recordset(p_items) AS (quotas jsonb)) WITH ORDINALITY AS x(quotas, i)
               CROSS JOIN LATERAL jsonb_to_recordset(x.quotas) AS v(channel text)
              WHERE state[x.i] = 'created' ORDER BY 1) l;
    FOR q IN
      SELECT x.i, array_agg(v.channel ORDER BY v.o) AS chs, array_agg(v.count ORDER BY v.o) AS cnts, array_agg(v.quota ORDER BY v.o) AS lims
        FROM ROWS FROM (jsonb_to_recordset(p_items) AS (quotas jsonb)) WITH ORDINALITY AS x(quotas, i)
        CROSS JOIN LATERAL ROWS FROM (jsonb_to_recordset(x.quotas) AS (channel text, count int, quota int))
                   WITH ORDINALITY AS v(channel, count, quota, o)
       WHERE state[x.i] = 'created' GROUP BY x.i ORDER BY x.i
    LOOP
      SELECT v.c, v.lm INTO ch, lim
        FROM unnest(q.chs, q.cnts, q.lims) WITH ORDINALITY AS v(c, cnt, lm, o)
        LEFT JOIN usage_daily u ON u.client_id = clients[q.i] AND u.day = today AND u.channel = v.c
       WHERE coalesce(u.count, 0) + v.cnt > v.lm ORDER BY v.o LIMIT 1;
      IF FOUND THEN
        state[q.i] := 'quota'; over_ch[q.i] := ch; over_lim[q.i] := lim;
      ELSE
        INSERT INTO usage_daily AS u (client_id, day, channel, count)
        SELECT clients[q.i], today, v.c, v.cnt FROM unnest(q.chs, q.cnts) AS v(c, cnt)
        ON CONFLICT (client_id, day, channel) DO UPDATE SET count = u.count + EXCLUDED.count;
      END IF;
    END LOOP;
  END IF;

  -- 4. Release the keys of refused items; store the others.
  IF 'tenant' = ANY (state) OR 'quota' = ANY (state) THEN
    DELETE FROM idempotency_keys k USING unnest(state, clients, keys) AS v(s, c, kk)
     WHERE v.s IN ('tenant', 'quota') AND k.client_id = v.c AND k.key = v.kk;
  END IF;

  INSERT INTO handoffs (id, client_id, tenant, event_type, reference, callback_url, messages, traceparent)
  SELECT x.handoff_id, x.client_id, x.tenant, x.event_type, x.reference, x.callback_url, x.messages, x.traceparent
    FROM ROWS FROM (jsonb_to_recordset(p_items) AS (handoff_id uuid, client_id text, tenant text, event_type text,
                                                   reference text, callback_url text, messages jsonb, traceparent text))
         WITH ORDINALITY AS x(handoff_id, client_id, tenant, event_type, reference, callback_url, messages, traceparent, i)
   WHERE state[x.i] = 'created';

  INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, reference, channel, recipient)
  SELECT d.id, x.handoff_id, x.client_id, x.tenant, x.event_type, x.reference, d.channel, d.recipient
    FROM ROWS FROM (jsonb_to_recordset(p_items) AS (handoff_id uuid, client_id text, tenant text, event_type text,
                                                   reference text, deliveries jsonb))
         WITH ORDINALITY AS x(handoff_id, client_id, tenant, event_type, reference, deliveries, i)
   CROSS JOIN LATERAL jsonb_to_recordset(x.deliveries) AS d(id uuid, channel text, recipient text)
   WHERE state[x.i] = 'created';

  -- Which of the new deliveries use which media objects (only items with inline images have any).
  IF p_items @? '$[*].media_refs' THEN
    INSERT INTO media_refs (storage_key, delivery_id)
    SELECT r.key, r.delivery_id
      FROM ROWS FROM (jsonb_to_recordset(p_items) AS (media_refs jsonb)) WITH ORDINALITY AS x(media_refs, i)
     CROSS JOIN LATERAL jsonb_to_recordset(x.media_refs) AS r(key text, delivery_id uuid)
     WHERE state[x.i] = 'created'
    ON CONFLICT DO NOTHING;
  END IF;

  -- 5. One row per item. A replay reads the stored key now: this statement's snapshot sees a key
  --    that a transaction waited for in step 1 committed, and the earlier items of this batch.
  RETURN QUERY
  SELECT CASE WHEN u.s = 'replay' AND k.response IS NULL THEN 'retry' ELSE u.s END,
         k.response, k.request_hash, over_ch[u.i::int], over_lim[u.i::int]
    FROM unnest(state, clients, keys) WITH ORDINALITY AS u(s, c, kk, i)
    LEFT JOIN LATERAL (SELECT x.response, x.request_hash FROM idempotency_keys x
                        WHERE u.s = 'replay' AND x.client_id = u.c AND x.key = u.kk) k ON true
   ORDER BY u.i;
END
$$;
