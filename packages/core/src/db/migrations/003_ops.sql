-- The operations console at /ops/: staff and their sessions, the audit log, and alert rules.

-- One row per person who ever signed in, keyed by the identity provider's (issuer, subject).
-- groups is the groups claim as it was at the last sign-in; granted is set by `ens staff grant`.
CREATE TABLE staff (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  issuer     text NOT NULL,
  subject    text NOT NULL,
  email      text,
  name       text,
  groups     jsonb NOT NULL DEFAULT '[]'::jsonb,
  granted    boolean NOT NULL DEFAULT false,
  first_seen timestamptz NOT NULL DEFAULT now(),
  last_seen  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (issuer, subject)
);
CREATE INDEX staff_email ON staff (lower(email));

-- `ens staff grant EMAIL` for someone who has not signed in yet: applied at their first sign-in.
CREATE TABLE staff_grants (
  email      text PRIMARY KEY CHECK (email = lower(email)),
  granted_at timestamptz NOT NULL DEFAULT now(),
  "by"       text NOT NULL
);

-- id is the SHA-256 of the cookie's token, so a read of this table cannot be replayed as a cookie.
CREATE TABLE ops_sessions (
  id         text PRIMARY KEY,
  staff_id   bigint NOT NULL REFERENCES staff(id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ops_sessions_expires ON ops_sessions (expires_at);

-- Forms whose answer must happen once (a new client's secrets): a browser reload re-posts the
-- form, and the submission id it carries tells the console it has already been acted on.
CREATE TABLE ops_form_submissions (
  id     text PRIMARY KEY,
  result text,
  at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE audit_log (
  id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at       timestamptz NOT NULL DEFAULT now(),
  actor    text NOT NULL,
  staff_id bigint REFERENCES staff(id) ON DELETE SET NULL,
  action   text NOT NULL,
  target   text,
  detail   jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- Failure-rate rules: fire when, over the last window_minutes, at least min_volume deliveries of
-- the event type (or tenant) ended and failed ones make threshold_percent or more of them.
CREATE TABLE alert_rules (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name              text NOT NULL,
  scope             text NOT NULL CHECK (scope IN ('event_type', 'tenant')),
  value             text NOT NULL,
  window_minutes    integer NOT NULL CHECK (window_minutes BETWEEN 1 AND 1440),
  min_volume        integer NOT NULL CHECK (min_volume >= 1),
  threshold_percent numeric(5, 2) NOT NULL CHECK (threshold_percent > 0 AND threshold_percent <= 100),
  destination_kind  text NOT NULL CHECK (destination_kind IN ('email', 'webhook')),
  destination       text NOT NULL,
  created_by        text NOT NULL,
  created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE alert_firings (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  rule_id          bigint NOT NULL REFERENCES alert_rules(id) ON DELETE CASCADE,
  started_at       timestamptz NOT NULL DEFAULT now(),
  resolved_at      timestamptz,
  -- what the evaluator saw when it fired, and last
  total            integer NOT NULL,
  failed           integer NOT NULL,
  rate_percent     numeric(5, 2) NOT NULL,
  notified_at      timestamptz,
  notify_attempts  integer NOT NULL DEFAULT 0,
  notify_error     text
);
-- At most one open firing per rule, whatever number of evaluators run.
CREATE UNIQUE INDEX alert_firings_open ON alert_firings (rule_id) WHERE resolved_at IS NULL;
CREATE INDEX alert_firings_rule ON alert_firings (rule_id, id);

-- Provider health reads the attempts of the last minutes. Attempts are inserted in started_at
-- order, so a BRIN index (nothing written per insert beyond a range summary) finds them.
CREATE INDEX attempts_started ON attempts USING brin (started_at) WITH (autosummarize = on);
