-- Each ENS process that claims work holds a session here, kept alive by a heartbeat; a claim names
-- the session that made it, so a process found dead (killed, or paused past ENS_SESSION_TIMEOUT)
-- has its claims ended at once instead of after their lease (store/process-sessions.ts).
-- The heartbeat is a row, not a lock on a connection: it survives a pooler in transaction mode and
-- a PostgreSQL failover, and it stops for a paused process, whose connections stay open.
CREATE TABLE process_sessions (
  id           serial PRIMARY KEY,
  pid          int NOT NULL,
  host         text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- Written by the claim's own UPDATE and read only when a session dies: no index, so that the claim
-- stays a HOT update, and an int, so that it costs the row four bytes.
ALTER TABLE deliveries ADD COLUMN claimed_by int;
ALTER TABLE callbacks ADD COLUMN claimed_by int;
