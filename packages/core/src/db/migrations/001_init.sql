-- ENS schema v1. PostgreSQL is the system of record; JetStream only carries wake-ups.

CREATE TABLE clients (
  id                  text PRIMARY KEY,
  name                text NOT NULL,
  secret_hash         text NOT NULL,
  callback_secret_enc text,
  disabled_at         timestamptz,
  rate_limit          integer CHECK (rate_limit > 0),
  daily_quota         jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tenants (
  client_id  text NOT NULL REFERENCES clients(id),
  id         text NOT NULL,
  name       text,
  settings   jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, id)
);

CREATE TABLE idempotency_keys (
  client_id    text NOT NULL,
  key          text NOT NULL,
  request_hash text NOT NULL,
  response     text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, key)
);
-- Serves only the purge. Keys are inserted in created_at order, so a BRIN index (a summary per
-- 128 pages, nothing written per insert) finds the old ones about as well as a B-tree would.
CREATE INDEX idempotency_keys_created ON idempotency_keys USING brin (created_at) WITH (autosummarize = on);

CREATE TABLE handoffs (
  id           uuid PRIMARY KEY,
  client_id    text NOT NULL,
  tenant       text NOT NULL,
  event_type   text NOT NULL,
  reference    text,
  callback_url text,
  messages     jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  -- a tenant with messages cannot be deleted, even by a delete racing a send
  FOREIGN KEY (client_id, tenant) REFERENCES tenants (client_id, id)
);

CREATE TABLE deliveries (
  id                  uuid PRIMARY KEY,
  handoff_id          uuid NOT NULL REFERENCES handoffs(id),
  client_id           text NOT NULL,
  tenant              text NOT NULL,
  event_type          text NOT NULL,
  reference           text,
  channel             text NOT NULL,
  recipient           text NOT NULL,
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
  attempts            integer NOT NULL DEFAULT 0,
  provider            text,
  provider_message_id text,
  sent_at             timestamptz,
  delivered_at        timestamptz,
  read_at             timestamptz,
  last_error          text,
  -- when the worker may try next; the sweeper re-enqueues rows overdue by more than its grace
  next_attempt_at     timestamptz NOT NULL DEFAULT now(),
  lease_until         timestamptz,
  -- every transition is `WHERE version = $seen`, so concurrent writers cannot overwrite each other
  version             integer NOT NULL DEFAULT 0,
  created_at          timestamptz NOT NULL DEFAULT now(),
  -- change-feed stamp, set only by the feed role in commit order (DESIGN invariant 3)
  updated_at          timestamptz,
  stamp_pending       boolean NOT NULL DEFAULT true
) WITH (fillfactor = 80);  -- room on each page so a claim (no indexed column changes) is a HOT update
CREATE UNIQUE INDEX deliveries_feed ON deliveries (client_id, updated_at) WHERE updated_at IS NOT NULL;
CREATE INDEX deliveries_unstamped ON deliveries (id) WHERE stamp_pending;
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_provider_message ON deliveries (provider, provider_message_id) WHERE provider_message_id IS NOT NULL;
CREATE INDEX deliveries_reference ON deliveries (client_id, reference, updated_at) WHERE reference IS NOT NULL;

CREATE TABLE feed_clock (
  id   integer PRIMARY KEY CHECK (id = 1),
  last timestamptz NOT NULL
);
INSERT INTO feed_clock VALUES (1, '-infinity');

CREATE TABLE attempts (
  delivery_id         uuid NOT NULL REFERENCES deliveries(id),
  number              integer NOT NULL,
  provider            text NOT NULL,
  started_at          timestamptz NOT NULL DEFAULT now(),
  finished_at         timestamptz,
  outcome             text CHECK (outcome IN ('sent', 'transient', 'permanent', 'rate_limited', 'lost')),
  provider_message_id text,
  error               text,
  PRIMARY KEY (delivery_id, number)
);

-- Status reports from providers (webhooks, the sandbox's simulated handset), kept for operators.
CREATE TABLE delivery_events (
  id          bigserial PRIMARY KEY,
  delivery_id uuid NOT NULL REFERENCES deliveries(id),
  kind        text NOT NULL,
  occurred_at timestamptz NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  detail      text
);
CREATE INDEX delivery_events_delivery ON delivery_events (delivery_id);

CREATE TABLE callbacks (
  id              uuid PRIMARY KEY,
  delivery_id     uuid NOT NULL REFERENCES deliveries(id),
  client_id       text NOT NULL,
  url             text NOT NULL,
  body            text NOT NULL,
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
  attempts        integer NOT NULL DEFAULT 0,
  -- attempts made before the last operator replay; the back-off schedule restarts after it
  attempt_base    integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  lease_until     timestamptz,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX callbacks_due ON callbacks (next_attempt_at) WHERE status = 'pending';
CREATE INDEX callbacks_dead ON callbacks (client_id, updated_at) WHERE status = 'dead';

CREATE TABLE callback_attempts (
  callback_id uuid NOT NULL REFERENCES callbacks(id),
  number      integer NOT NULL,
  at          timestamptz NOT NULL DEFAULT now(),
  http_status integer,
  error       text,
  PRIMARY KEY (callback_id, number)
);

-- Daily usage of the channels a client has a quota on. Clients without a quota never touch it,
-- so their sends share no hot row; their usage is counted from deliveries when asked.
CREATE TABLE usage_daily (
  client_id text NOT NULL,
  day       date NOT NULL,
  channel   text NOT NULL,
  count     integer NOT NULL,
  PRIMARY KEY (client_id, day, channel)
);

/*
 * Accepts a batch of handoffs in one statement, so one transaction and one commit serve them all.
 * p_* hold one element per item (p_messages is a JSON array), p_d_* one per delivery and p_q_* one
 * per (item, channel) that has a daily quota (limit > 0), each tagged with its item's position
 * (1-based). Returns one row per item, in item order, with its outcome:
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
CREATE FUNCTION ens_accept_batch(
  p_clients text[], p_keys text[], p_hashes text[], p_responses text[],
  p_handoffs uuid[], p_tenants text[], p_event_types text[], p_references text[], p_callback_urls text[],
  p_messages jsonb,
  p_d_items int[], p_d_ids uuid[], p_d_channels text[], p_d_recipients text[],
  p_q_items int[], p_q_channels text[], p_q_counts int[], p_q_limits int[]
) RETURNS TABLE (outcome text, stored_response text, stored_hash text, over_channel text, over_quota int)
LANGUAGE plpgsql
-- Plan each statement once per session: the plans do not depend on the arrays' contents (every
-- table is reached by its key), and planning them again on every call cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  n         int := cardinality(p_keys);
  today     date := (now() AT TIME ZONE 'UTC')::date;
  state     text[];
  over_ch   text[] := array_fill(NULL::text, ARRAY[n]);
  over_lim  int[] := array_fill(NULL::int, ARRAY[n]);
  q         record;
  ch        text;
  lim       int;
BEGIN
  -- 1. Claim the keys. A key held by a concurrent transaction makes this wait for its outcome.
  WITH ins AS (
    INSERT INTO idempotency_keys (client_id, key, request_hash, response)
    SELECT c, k, p_hashes[i::int], p_responses[i::int] FROM unnest(p_clients, p_keys) WITH ORDINALITY AS u(c, k, i)
     ORDER BY c, k, i
    ON CONFLICT DO NOTHING
    RETURNING client_id, key)
  SELECT array_agg(CASE WHEN ins.key IS NOT NULL AND u.first THEN 'created' ELSE 'replay' END ORDER BY u.i) INTO state
    FROM (SELECT c, k, i, row_number() OVER (PARTITION BY c, k ORDER BY i) = 1 AS first
            FROM unnest(p_clients, p_keys) WITH ORDINALITY AS u(c, k, i)) u
    LEFT JOIN ins ON ins.client_id = u.c AND ins.key = u.k;

  -- 2. Tenants: lock the rows the new handoffs will refer to (as their foreign key would), so a
  --    tenant deleted meanwhile refuses its items instead of failing the batch.
  SELECT array_agg(CASE WHEN u.s = 'created' AND t.id IS NULL THEN 'tenant' ELSE u.s END ORDER BY u.i) INTO state
    FROM unnest(state, p_clients, p_tenants) WITH ORDINALITY AS u(s, c, tn, i)
    LEFT JOIN (SELECT t.client_id, t.id FROM tenants t
                 JOIN (SELECT DISTINCT c, tn FROM unnest(state, p_clients, p_tenants) AS v(s, c, tn) WHERE s = 'created') v
                   ON t.client_id = v.c AND t.id = v.tn
                ORDER BY t.client_id, t.id
                  FOR KEY SHARE OF t) t ON t.client_id = u.c AND t.id = u.tn;

  -- 3. Daily quotas. Lock every (client, channel) concerned, in one order, then take the items in
  --    order: one fits when each of its channels has room; only then is its usage counted.
  IF cardinality(p_q_items) > 0 THEN
    PERFORM pg_advisory_xact_lock(l.h)
       FROM (SELECT DISTINCT hashtext(p_clients[i] || '/' || c) AS h
               FROM unnest(p_q_items, p_q_channels) AS v(i, c) WHERE state[i] = 'created' ORDER BY 1) l;
    FOR q IN
      SELECT i, array_agg(c ORDER BY o) AS chs, array_agg(cnt ORDER BY o) AS cnts, array_agg(lm ORDER BY o) AS lims
        FROM unnest(p_q_items, p_q_channels, p_q_counts, p_q_limits) WITH ORDINALITY AS v(i, c, cnt, lm, o)
       WHERE state[i] = 'created' GROUP BY i ORDER BY i
    LOOP
      SELECT v.c, v.lm INTO ch, lim
        FROM unnest(q.chs, q.cnts, q.lims) WITH ORDINALITY AS v(c, cnt, lm, o)
        LEFT JOIN usage_daily u ON u.client_id = p_clients[q.i] AND u.day = today AND u.channel = v.c
       WHERE coalesce(u.count, 0) + v.cnt > v.lm ORDER BY v.o LIMIT 1;
      IF FOUND THEN
        state[q.i] := 'quota'; over_ch[q.i] := ch; over_lim[q.i] := lim;
      ELSE
        INSERT INTO usage_daily AS u (client_id, day, channel, count)
        SELECT p_clients[q.i], today, v.c, v.cnt FROM unnest(q.chs, q.cnts) AS v(c, cnt)
        ON CONFLICT (client_id, day, channel) DO UPDATE SET count = u.count + EXCLUDED.count;
      END IF;
    END LOOP;
  END IF;

  -- 4. Release the keys of refused items; store the others.
  IF 'tenant' = ANY (state) OR 'quota' = ANY (state) THEN
    DELETE FROM idempotency_keys k USING unnest(state, p_clients, p_keys) AS v(s, c, kk)
     WHERE v.s IN ('tenant', 'quota') AND k.client_id = v.c AND k.key = v.kk;
  END IF;

  INSERT INTO handoffs (id, client_id, tenant, event_type, reference, callback_url, messages)
  SELECT h, c, tn, e, r, cb, p_messages -> (i::int - 1)
    FROM unnest(state, p_handoffs, p_clients, p_tenants, p_event_types, p_references, p_callback_urls)
         WITH ORDINALITY AS u(s, h, c, tn, e, r, cb, i)
   WHERE s = 'created';

  INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, reference, channel, recipient)
  SELECT d.id, p_handoffs[d.i], p_clients[d.i], p_tenants[d.i], p_event_types[d.i], p_references[d.i], d.c, d.r
    FROM unnest(p_d_items, p_d_ids, p_d_channels, p_d_recipients) AS d(i, id, c, r)
   WHERE state[d.i] = 'created';

  -- 5. One row per item. A replay reads the stored key now: this statement's snapshot sees a key
  --    that a transaction waited for in step 1 committed, and the earlier items of this batch.
  RETURN QUERY
  SELECT CASE WHEN u.s = 'replay' AND k.response IS NULL THEN 'retry' ELSE u.s END,
         k.response, k.request_hash, over_ch[u.i::int], over_lim[u.i::int]
    FROM unnest(state, p_clients, p_keys) WITH ORDINALITY AS u(s, c, kk, i)
    LEFT JOIN LATERAL (SELECT x.response, x.request_hash FROM idempotency_keys x
                        WHERE u.s = 'replay' AND x.client_id = u.c AND x.key = u.kk) k ON true
   ORDER BY u.i;
END
$$;
