/*
 * Reserves send times for up to p_want messages to provider p_name (paced at p_per_second), p_interval_ms apart, from the
 * provider's next free time on (or now, if that has passed), but none later than p_horizon_ms from
 * now. Returns how many were reserved and when the first may go, in ms from now and as a Unix time
 * in ms; the others follow at the interval. Every worker process reserves from the same row, so sends to the provider are
 * spaced by the interval across all of them, whatever the latency of this call. p_pause_ms > 0 (a
 * 429 with Retry-After) moves the next free time to at least that far from now, for everyone.
 */
CREATE OR REPLACE FUNCTION ens_reserve_sends(p_name text, p_per_second float8, p_interval_ms float8, p_want int, p_horizon_ms float8, p_pause_ms float8 DEFAULT 0)
RETURNS TABLE (granted int, first_in_ms float8, first_at_ms float8)
LANGUAGE plpgsql
AS $$
DECLARE
  now_  timestamptz := clock_timestamp();
  next_ timestamptz;
  ahead float8;
  n     int;
BEGIN
  INSERT INTO provider_pace (name, next_at, per_second, updated_at) VALUES (p_name, now_, p_per_second, now_) ON CONFLICT (name) DO NOTHING;
  SELECT greatest(next_at, now_) INTO next_ FROM provider_pace WHERE name = p_name FOR UPDATE;
  IF p_pause_ms > 0 THEN
    next_ := greatest(next_, now_ + p_pause_ms * interval '1 millisecond');
  END IF;
  ahead := extract(epoch FROM next_ - now_) * 1000;
  -- Times at ahead, ahead + interval, … that fall within the horizon.
  n := greatest(0, least(p_want, ceil((p_horizon_ms - ahead) / p_interval_ms)::int));
  UPDATE provider_pace SET next_at = next_ + n * p_interval_ms * interval '1 millisecond', per_second = p_per_second, updated_at = now_ WHERE name = p_name;
  granted := n;
  first_in_ms := ahead;
  first_at_ms := extract(epoch FROM next_) * 1000;
  RETURN NEXT;
END
$$;
