-- The suppression list's channels are the channel table's (packages/core/src/domain/channels.ts),
-- which every write path checks before it reaches SQL (the API, the console, the CLI and the
-- providers' reports all normalise the address by its channel's row). Migration 010 wrote the
-- list out a second time as a CHECK, so adding a channel needed a migration too (issue 24).
ALTER TABLE suppressions DROP CONSTRAINT IF EXISTS suppressions_channel_check;
