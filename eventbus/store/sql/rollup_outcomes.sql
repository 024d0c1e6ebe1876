-- name: rollup_outcomes
-- One consumer's settled outcomes since a minute (eventbus.history.rollup.outcomes / failure_rate, which
-- circuit breakers read): a short range of the rollup's primary key, one row per organization
-- and minute at most, summed.
SELECT coalesce(sum(done), 0)::bigint AS done, coalesce(sum(failed), 0)::bigint AS failed,
       coalesce(sum(dead), 0)::bigint AS dead
  FROM eventbus_rollup
 WHERE bucket_start >= %(since)s AND consumer = %(consumer)s
