-- The sweeper records when it last woke a row instead of moving the row's due time, so
-- next_attempt_at stays the moment the work became due and the backlog's age can be read from it.
ALTER TABLE deliveries ADD COLUMN swept_at timestamptz;
ALTER TABLE callbacks ADD COLUMN swept_at timestamptz;
