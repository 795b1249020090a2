-- A delivery's first callback (the one its terminal state queues) takes its delivery's id as its
-- own, so it is found by primary key, and callbacks_delivery holds only the others: a late
-- failure report's callback, and callbacks queued before this migration. Every callback written
-- an entry in callbacks_delivery when inserted and another when its outcome (not HOT) updated it,
-- ~144 bytes of WAL per delivery (issue 27); the first callback now writes none. A delivery has
-- one first callback: it reaches a terminal state once (store/deliveries.ts). Lookups by delivery
-- go through callbacksOfSql (store/callbacks.ts), which asks both.
DROP INDEX callbacks_delivery;
CREATE INDEX callbacks_delivery ON callbacks (delivery_id) WHERE id <> delivery_id;
