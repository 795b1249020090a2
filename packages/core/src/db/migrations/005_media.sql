-- Inline images in media storage. Storage keys are content hashes, so one object can serve many
-- handoffs and a request that is refused may name an object an accepted one also uses; the two
-- tables below are what lets the sweeper remove an object no delivery needs any more without ever
-- removing one that an accept in flight is about to use (core/media/media-collector.ts).

-- One row per object written, with the time of the last write. An accept records its keys here
-- (put_at = now()) before writing the objects, and the collector removes an object only while
-- holding its row locked and only when put_at is older than ENS_MEDIA_GRACE.
CREATE TABLE media_objects (
  storage_key text PRIMARY KEY,
  put_at      timestamptz NOT NULL DEFAULT now()
);

-- Which deliveries use which objects, written by ens_accept_batch with the deliveries. An object
-- is in use while one of its deliveries is pending.
CREATE TABLE media_refs (
  storage_key text NOT NULL,
  delivery_id uuid NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
  PRIMARY KEY (storage_key, delivery_id)
);
