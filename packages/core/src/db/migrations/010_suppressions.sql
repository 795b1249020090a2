-- Consent: the suppression list. One entry per (client, tenant, channel, address, scope); the send
-- path reads it at claim time, so an entry committed after the accept still stops the send
-- (DESIGN invariant 8). Addresses are kept normalised (email case-folded, domain in IDNA ASCII;
-- phone numbers E.164 with +), so a delivery's recipient is matched by key, not by pattern.
CREATE TABLE suppressions (
  client_id   text NOT NULL,
  tenant      text NOT NULL,
  channel     text NOT NULL CHECK (channel IN ('sms', 'email', 'push', 'whatsapp')),
  address     text NOT NULL,
  -- '*' for every event type, or the one event type an unsubscribe named
  scope       text NOT NULL DEFAULT '*',
  reason      text NOT NULL CHECK (reason IN ('hard_bounce', 'soft_bounce', 'complaint', 'opt_out', 'invalid_recipient', 'manual')),
  -- where the entry came from: provider (a refusal or a provider's report), bounce_mail,
  -- complaint_mail, unsubscribe, api, console, cli, import
  source      text NOT NULL,
  provider    text,
  delivery_id uuid,
  -- the evidence: the provider's own words, a DSN's diagnostic, the operator's note
  detail      text,
  created_by  text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  -- soft bounces hold for a while; every other reason until removed
  expires_at  timestamptz,
  PRIMARY KEY (client_id, tenant, channel, address, scope),
  -- a tenant's list goes with the tenant (a tenant with messages cannot be deleted at all)
  FOREIGN KEY (client_id, tenant) REFERENCES tenants (client_id, id) ON DELETE CASCADE
);
-- The dashboard counts entries added per day; inserts come in created_at order, so a BRIN index
-- summarises them for nearly nothing per insert.
CREATE INDEX suppressions_created ON suppressions USING brin (created_at) WITH (autosummarize = on);
CREATE INDEX suppressions_expiring ON suppressions (expires_at) WHERE expires_at IS NOT NULL;

-- The consent policy of each client: which reasons suppress (all, by default), which event types
-- are bulk (one-click unsubscribe headers, unsubscribes scoped to them) and which must reach the
-- recipient despite an email or push opt-out or complaint (a password reset). An sms or whatsapp
-- opt-out (STOP) blocks every event type, as carriers require.
ALTER TABLE clients
  ADD COLUMN suppression_reasons text[] NOT NULL
    DEFAULT '{hard_bounce,soft_bounce,complaint,opt_out,invalid_recipient,manual}',
  ADD COLUMN bulk_event_types text[] NOT NULL DEFAULT '{}',
  ADD COLUMN must_deliver_event_types text[] NOT NULL DEFAULT '{}';

-- A bounce or complaint that arrives after an email was sent: the delivery stays sent (a terminal
-- state), and the report is shown on it, as whatsapp's delivered_at is.
ALTER TABLE deliveries
  ADD COLUMN bounced_at timestamptz,
  ADD COLUMN complained_at timestamptz;
