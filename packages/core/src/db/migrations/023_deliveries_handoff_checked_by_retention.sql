-- A delivery is only ever inserted by the accept, in the statement that inserts its handoff
-- (ens_accept_batch), so its handoff exists and is not yet visible to anyone else; retention, the
-- one deleter of handoffs, deletes only those that no delivery refers to, checked in its DELETE
-- (retention/retention-job.ts). So the foreign key checked nothing those two do not, and it cost
-- every accepted delivery a trigger query (a key-share lookup of its handoff, about two fifths of
-- the accept's PostgreSQL CPU) and every update of a delivery a trigger call (issue 27), as
-- migration 020 found for attempts and callbacks.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_handoff_id_fkey;
