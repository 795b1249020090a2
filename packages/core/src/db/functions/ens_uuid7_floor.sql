/*
 * Delivery ids are UUIDv7 (see ids.ts): their first 48 bits are the creation time in Unix
 * milliseconds, so "created since T" is a range of the primary key. This is the smallest id a
 * delivery created at or after T can have; the console's time filters add it beside the created_at
 * test so that PostgreSQL reads only that end of the primary-key index.
 */
CREATE OR REPLACE FUNCTION ens_uuid7_floor(ts timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
  SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
    FROM (SELECT lpad(to_hex(greatest(0, floor(extract(epoch FROM ts) * 1000))::bigint), 12, '0') AS h) x
$$;
