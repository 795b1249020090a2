-- The feed role leaves a new delivery to its outcome, which stamps it itself (issue 27;
-- store/feed.ts, STAMP_SQL): one write of the row that is not HOT instead of two, about 0.6 KB
-- less WAL per delivery. It reads the rows it does stamp from two indexes, so it never reads past
-- the new ones: those created before its cut-off are a range of deliveries_unstamped (UUIDv7
-- ids), and the rows changed again after a stamp (a provider's report, a failure found by the
-- sweeper) are this index. A new row has no stamp yet, so it is not here: an entry is written
-- only by such a change, which is not HOT anyway (it sets stamp_pending).
-- On a database that already holds many deliveries, the build holds off writes to deliveries:
-- apply it in a quiet hour (it reads the table once; the index itself is small).
CREATE INDEX deliveries_restamp ON deliveries (id) WHERE stamp_pending AND updated_at IS NOT NULL;
