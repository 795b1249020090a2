-- The push device registry: the caller's user ids are ENS's push recipients, and each user may
-- have devices on several platforms. Rows go with their tenant (a tenant is only deleted when it
-- has no messages; its devices are registrations, not history).
CREATE TABLE devices (
  client_id    text NOT NULL,
  tenant       text NOT NULL,
  user_id      text NOT NULL,
  token        text NOT NULL,
  platform     text NOT NULL CHECK (platform IN ('fcm', 'apns', 'webpush')),
  subscription jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, tenant, user_id, token),
  FOREIGN KEY (client_id, tenant) REFERENCES tenants (client_id, id) ON DELETE CASCADE,
  CHECK ((platform = 'webpush') = (subscription IS NOT NULL))
);
