-- An attempt's row is written once, when the attempt ends (its outcome, or 'lost' when its claim
-- ended without one), instead of at its claim and again at its outcome (issue 27). Measured
-- (bench:wal, 2 x 10,000, callbacks off): the attempts table cost ~0.42 KB of WAL per delivery,
-- an insert, an update that mostly was not HOT and two primary-key entries.
-- The attempt in flight is the delivery row itself: pending, leased, with the claim's time and
-- provider. A claim must stay a HOT update, so no index may use a column it sets: provider reports
-- find their delivery by provider_message_id alone and then check the provider. Only equality is
-- ever asked of that index, so it is a hash index: an entry holds the id's 4-byte hash, not the id
-- (bench:wal: 90 instead of 145 bytes per delivery with the sandbox's 44-character ids).
ALTER TABLE deliveries ADD COLUMN claimed_at timestamptz;
-- The claim's version is wider by those two columns: at fillfactor 50, 8 % of claims found no room
-- on their page and were not HOT; at 45, 1 % (bench:wal with callbacks: 2.79 -> 2.74 KB).
ALTER TABLE deliveries SET (fillfactor = 45);
DROP INDEX deliveries_provider_message;
CREATE INDEX deliveries_provider_message ON deliveries USING hash (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- The attempts an earlier version left open: one whose claim is still open becomes that claim
-- (its outcome will write the row), any other one ended without an outcome and is lost.
UPDATE deliveries d SET claimed_at = a.started_at, provider = a.provider
  FROM attempts a
 WHERE a.delivery_id = d.id AND a.number = d.attempts AND a.outcome IS NULL
   AND d.status = 'pending' AND d.lease_until IS NOT NULL;
DELETE FROM attempts a USING deliveries d
 WHERE a.delivery_id = d.id AND a.number = d.attempts AND a.outcome IS NULL
   AND d.status = 'pending' AND d.lease_until IS NOT NULL;
UPDATE attempts SET outcome = 'lost', finished_at = now(), error = 'its claim ended without an outcome'
 WHERE outcome IS NULL;
