-- name: reap
-- Take over deliveries whose lease ran out (their worker died, hung, or lost the database).
--
-- The expired rows (served by delivery_lease_idx) get a fresh token and lease so the reaper
-- alone settles them, with, per row, how many deliveries its worker (`locked_by`) was holding
-- in all: the worker's other rows are still `processing`, expired or about to be (they share
-- its heartbeat), and processing rows are few (in flight only). The caller decides from that
-- count who is charged: a worker that held exactly one delivery died running it; one that held
-- several could have been killed by any of them, so none is charged and each runs alone next
-- (see claim_isolated.sql).
WITH expired AS MATERIALIZED (
    SELECT id, locked_by FROM eventbus_delivery
     WHERE status = 'processing' AND locked_until < %(now)s
     ORDER BY locked_until
     LIMIT %(limit)s
       FOR UPDATE SKIP LOCKED
), held AS MATERIALIZED (
    SELECT x.locked_by, count(*) AS n FROM eventbus_delivery x
     WHERE x.status = 'processing'
       AND x.locked_by IN (SELECT locked_by FROM expired WHERE locked_by IS NOT NULL)
     GROUP BY x.locked_by
)
UPDATE eventbus_delivery d
   SET lease_token = %(token)s, locked_until = %(lease_until)s, updated_at = %(now)s
  FROM expired LEFT JOIN held ON held.locked_by = expired.locked_by
 WHERE d.id = expired.id AND d.status = 'processing' AND d.locked_until < %(now)s
RETURNING d.id AS delivery_id, d.attempts AS attempt, d.max_attempts, d.locked_by, d.isolate,
          coalesce(held.n, 1) AS held_by_worker
