-- name: claim_isolated
-- Claim up to %(batch)s due deliveries marked `isolate`, oldest due first.
--
-- A delivery is marked `isolate` when its worker died (or lost its lease) while it was claimed
-- together with others: any of them may have killed the worker, so none is charged, and each
-- now runs alone. The drain claims them one at a time (%(batch)s = 1) and runs nothing else
-- meanwhile, so a handler that kills its worker again is the only delivery of that worker and
-- is charged for it (see reap.sql); the relay, which runs no handler, publishes them as usual.
-- Ordered consumers' deliveries wait for their key's turn as in claim.sql.
-- Served by delivery_isolated_idx (only isolated pending rows are in it: usually none).
-- Each `-- include: parts/<name>.sql` line is a piece shared with the other claims, written
-- once there and put in place on load (eventbus/store/sql/__init__.py); statement("claim_isolated")
-- gives the whole statement as sent, to read or EXPLAIN.
WITH picked AS MATERIALIZED (
    SELECT d.id FROM eventbus_delivery d
    -- include: parts/isolated_waiting.sql
     ORDER BY d.priority DESC, d.next_attempt_at
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
-- include: parts/lease.sql
   AND d.status = 'pending' AND d.next_attempt_at <= %(now)s
   AND e.id = d.event_id
-- include: parts/claimed.sql
