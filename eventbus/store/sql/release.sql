-- name: release
-- Give back claimed deliveries whose handler never started (or was cut off by the worker's own
-- failure: a lost database connection, a stop): pending again at once, the attempt the claim
-- counted refunded. Fenced by the lease token; returns the ids released.
UPDATE eventbus_delivery
   SET status = 'pending', attempts = greatest(attempts - 1, 0), locked_until = NULL,
       lease_token = NULL, locked_by = NULL, updated_at = %(now)s
 WHERE id = ANY(%(ids)s::bigint[]) AND lease_token = %(token)s AND status = 'processing'
RETURNING id
