-- The operations console's alert rules can be edited and muted. A muted rule is still evaluated
-- (its firings show on the dashboard) but notifies nobody until muted_until passes; 'infinity'
-- mutes it until someone unmutes it.
ALTER TABLE alert_rules
  ADD COLUMN muted_until timestamptz,
  ADD COLUMN muted_by    text,
  ADD COLUMN updated_at  timestamptz,
  ADD COLUMN updated_by  text;
