-- A callback keeps only what its body needs beyond its delivery's row (issue 27): the payload's
-- fields that can change after the event (status, attempts, provider_message_id, sent_at,
-- delivered_at, read_at, last_error) as a short JSON array, `snapshot`; delivery_id, reference,
-- channel and recipient never change after the accept and are read from the row when the callback
-- is posted (store/callbacks.ts), which builds the same bytes at every post
-- (schemas/callback-payload.ts). About 100 bytes where the body was about 300: ~0.2 KB less WAL
-- per callback, and as much less table. Callbacks queued before keep their whole body.
ALTER TABLE callbacks ALTER COLUMN body DROP NOT NULL;
ALTER TABLE callbacks ADD COLUMN snapshot text;
ALTER TABLE callbacks ADD CONSTRAINT callbacks_body_or_snapshot CHECK (body IS NOT NULL OR snapshot IS NOT NULL) NOT VALID;
