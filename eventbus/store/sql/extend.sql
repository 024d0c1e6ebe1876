-- name: extend
-- Heartbeat: push the lease of deliveries a worker still holds (running, queued, or finished
-- and not settled yet) forward. Fenced by the lease token; returns the ids still this claim's,
-- so a worker that was paused past its lease (and taken over) learns which it lost.
UPDATE eventbus_delivery SET locked_until = %(lease_until)s
 WHERE id = ANY(%(ids)s::bigint[]) AND lease_token = %(token)s AND status = 'processing'
RETURNING id
