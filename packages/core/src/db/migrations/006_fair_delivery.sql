-- Fair delivery: the operator's weights and priority lane (see core/scheduling/fair-queue.ts).
-- A client's weight is its share of each channel's send slots against other clients with work; a
-- tenant's weight is its share within its client. priority_event_types are the client's event
-- types (exact, or with * for any run of characters) that go ahead of its other messages.
ALTER TABLE clients
  ADD COLUMN send_weight integer NOT NULL DEFAULT 1 CHECK (send_weight BETWEEN 1 AND 100),
  ADD COLUMN priority_event_types text[] NOT NULL DEFAULT '{}';
ALTER TABLE tenants
  ADD COLUMN send_weight integer NOT NULL DEFAULT 1 CHECK (send_weight BETWEEN 1 AND 100);

-- Provider pacing: the next free send time of each paced provider, shared by every worker process
-- (ens_reserve_sends).
-- per_second and updated_at are what the last reservation said, for the console.
CREATE TABLE provider_pace (
  name       text PRIMARY KEY,
  next_at    timestamptz NOT NULL,
  per_second float8 NOT NULL,
  updated_at timestamptz NOT NULL
);
