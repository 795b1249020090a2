-- A successful callback post is recorded in the callbacks row its outcome updates anyway (status
-- 'delivered', attempts = its number, updated_at = when), so it no longer gets a callback_attempts
-- row too (issue 27): ~170 bytes of WAL per delivery (the row and its primary-key entry).
-- callback_attempts keeps the failed posts; the console puts the two together
-- (store/read-models/console-deliveries.ts). This column holds the HTTP status of the row's last
-- post. Callbacks delivered before this migration keep their callback_attempts row and have no
-- status here. Nullable without a default: no rewrite of the table.
ALTER TABLE callbacks ADD COLUMN last_http_status integer;
