-- The W3C traceparent of the span that accepted a handoff, and of the send attempt that queued a
-- callback: the worker and the callbacks role may run in other processes, so a trace crosses them
-- through these rows. Null when tracing was off and the request carried no traceparent (the usual
-- case), so rows without a trace cost nothing; nullable columns without a default are added
-- without rewriting the tables.
ALTER TABLE handoffs ADD COLUMN traceparent text;
ALTER TABLE callbacks ADD COLUMN traceparent text;
