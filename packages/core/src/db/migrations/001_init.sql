-- ENS schema v1. PostgreSQL is the system of record; JetStream only carries wake-ups.
-- Functions are not migrations: each is in ../functions/<name>.sql, defined again on every migrate.

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
