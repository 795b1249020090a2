-- Retention (ENS_RETENTION, core/retention/retention-job.ts): the sweeper removes whole handoffs
-- older than the retention, child rows first, in short batches. Each DELETE of a parent row makes
-- PostgreSQL look for rows that still refer to it, and these three references had no index, so
-- each look would read the whole child table. UUIDv7 values arrive in order, so each index grows
-- at its right edge, as the primary keys do.
-- On a database that already holds many deliveries, this migration builds the indexes while it
-- holds off writes to those tables: apply it in a quiet hour (minutes per hundred million rows).
CREATE INDEX deliveries_handoff ON deliveries (handoff_id);
CREATE INDEX callbacks_delivery ON callbacks (delivery_id);
CREATE INDEX media_refs_delivery ON media_refs (delivery_id);

-- The console's searches by reference or by recipient alone (no client named) walked the primary
-- key backwards until a page matched: at ten million deliveries that is seconds, and it grows
-- with the table. With these, each reads only its matches, newest first (services/ops/src/queries/
-- deliveries.ts orders by id). Two more index entries per delivery at accept: measured in the
-- README's Retention section.
CREATE INDEX deliveries_recipient ON deliveries (recipient, id);
CREATE INDEX deliveries_reference_id ON deliveries (reference, id) WHERE reference IS NOT NULL;

-- Rows go in batches of about a thousand deliveries every few minutes, so dead tuples and index
-- entries pile up at the old end of each index, which is where the feed's first page and the
-- retention's next batch start reading. Vacuum after 2 % of a table has changed instead of 20 %,
-- so a table of a hundred million rows is cleaned every two million changes, not every twenty.
ALTER TABLE handoffs          SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE deliveries        SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE attempts          SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE delivery_events   SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE callbacks         SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE callback_attempts SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE idempotency_keys  SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
