-- Less WAL per delivery (issue 27; test/bench/results/2026-11-26-wal.md). An UPDATE that changes
-- no indexed column and finds room on the row's own page is a HOT update: no index entry is
-- written, and the WAL record carries only the changed bytes of the row. Without room the new
-- version goes to another page, with a whole-row record and an entry in every index.
-- A callback row (its body included, ~450 bytes) is claimed, then recorded; the claim no longer
-- changes updated_at, which callbacks_dead indexes, so with room on the page it is HOT. Measured:
-- 0.85 KB less WAL per delivery with callbacks on.
ALTER TABLE callbacks SET (fillfactor = 50);
-- An attempt row is inserted by the claim and updated once by the outcome.
ALTER TABLE attempts SET (fillfactor = 70);
-- A delivery row is claimed (HOT: lease, attempts, version), then finished and stamped for the
-- feed (not HOT: status and updated_at are indexed). At 80 the finishes and stamps filled the
-- room the claims needed: half the claims went to another page. Measured: 0.38 KB less WAL per
-- delivery at 60.
ALTER TABLE deliveries SET (fillfactor = 60);
