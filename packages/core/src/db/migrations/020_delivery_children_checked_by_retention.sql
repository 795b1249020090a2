-- An attempt or a callback is only ever inserted by a transaction that holds its delivery's row
-- lock: the outcome and a lost attempt come from the statement that updates the row, and a
-- transition's callback from the transaction that made it (store/deliveries.ts,
-- store/process-sessions.ts). Retention, the one deleter of deliveries, locks its rows first and
-- checks, in the statement that deletes them, that none has an attempt or a callback left
-- (retention/retention-job.ts). So the foreign keys checked nothing those two do not, and their
-- check cost every delivery a row lock on its delivery (a Heap/LOCK record, ~67 bytes of WAL) and
-- two trigger queries (issue 27). delivery_events and media_refs keep theirs: neither is on the
-- path every delivery takes.
ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey;
ALTER TABLE callbacks DROP CONSTRAINT callbacks_delivery_id_fkey;
