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
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

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
 * Accepts one handoff in one round trip. Returns outcome 'created' or 'replay' (with the stored
 * response and request hash). Raises SQLSTATE EN001 when the tenant is not provisioned and EN002
 * when a daily quota is exceeded; either aborts the statement, so nothing is stored.
 */
CREATE FUNCTION ens_accept(
  p_client text, p_key text, p_hash text, p_response text,
  p_handoff uuid, p_tenant text, p_event_type text, p_reference text, p_callback_url text, p_messages jsonb,
  p_ids uuid[], p_channels text[], p_recipients text[],
  p_quota_channels text[], p_quota_counts integer[], p_quota_limits integer[]
) RETURNS TABLE (outcome text, response text, request_hash text)
LANGUAGE plpgsql AS $$
DECLARE
  i int;
  used bigint;
BEGIN
  INSERT INTO idempotency_keys (client_id, key, request_hash, response)
  VALUES (p_client, p_key, p_hash, p_response)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'replay'::text, k.response, k.request_hash
      FROM idempotency_keys k WHERE k.client_id = p_client AND k.key = p_key;
    RETURN;
  END IF;

  PERFORM 1 FROM tenants t WHERE t.client_id = p_client AND t.id = p_tenant;
  IF NOT FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'EN001', MESSAGE = p_tenant;
  END IF;

  FOR i IN 1 .. coalesce(array_length(p_quota_channels, 1), 0) LOOP
    CONTINUE WHEN p_quota_limits[i] <= 0;
    -- Serialise the check per client and channel, so concurrent sends cannot both see room for
    -- the last message; the counter row is then only ever written under this lock.
    PERFORM pg_advisory_xact_lock(hashtext(p_client || '/' || p_quota_channels[i]));
    INSERT INTO usage_daily AS u (client_id, day, channel, count)
    VALUES (p_client, (now() AT TIME ZONE 'UTC')::date, p_quota_channels[i], p_quota_counts[i])
    ON CONFLICT (client_id, day, channel) DO UPDATE SET count = u.count + EXCLUDED.count
    RETURNING u.count INTO used;
    IF used > p_quota_limits[i] THEN
      RAISE EXCEPTION USING ERRCODE = 'EN002', MESSAGE = p_quota_channels[i], DETAIL = p_quota_limits[i]::text;
    END IF;
  END LOOP;

  INSERT INTO handoffs (id, client_id, tenant, event_type, reference, callback_url, messages)
  VALUES (p_handoff, p_client, p_tenant, p_event_type, p_reference, p_callback_url, p_messages);

  INSERT INTO deliveries (id, handoff_id, client_id, tenant, event_type, reference, channel, recipient)
  SELECT d.id, p_handoff, p_client, p_tenant, p_event_type, p_reference, d.channel, d.recipient
    FROM unnest(p_ids, p_channels, p_recipients) AS d(id, channel, recipient);

  RETURN QUERY SELECT 'created'::text, p_response, p_hash;
END
$$;
