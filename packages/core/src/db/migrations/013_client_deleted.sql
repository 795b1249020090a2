-- A deleted client (`ens clients delete`, the console's Delete): its credentials are gone for good
-- and it is no longer listed, but its row stays, so the records that name it (handoffs,
-- deliveries, callbacks, tenants, suppressions, the audit log) keep a client to name until
-- retention removes them.
ALTER TABLE clients ADD COLUMN deleted_at timestamptz;
