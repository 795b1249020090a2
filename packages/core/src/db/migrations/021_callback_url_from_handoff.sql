-- A callback is posted to its handoff's callback_url, which never changes after the accept: a new
-- callback no longer copies it (~30–60 bytes of WAL per callback, written again by its outcome's
-- update) and reads it from the handoff when it is claimed (store/callbacks.ts, callbackUrlSql).
-- Callbacks queued before keep their own.
ALTER TABLE callbacks ALTER COLUMN url DROP NOT NULL;
