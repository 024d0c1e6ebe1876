-- name: rollup_series
-- Settled outcomes and the sampled lag per time step (one minute, fifteen minutes, ...) over a
-- window, optionally for one consumer and/or one organization: the status page's charts.
--
-- A range of the rollup's primary key (bucket_start leads it); the filters are checked on the
-- rows of that range (a day is 1,440 minutes times the active (organization, consumer) pairs).
-- date_bin aligns the steps to the same origin as the caller (eventbus.history.rollup.ORIGIN), so a
-- fifteen-minute step starts at :00, :15, :30 and :45. Lag is the worst pair's in each step.
SELECT date_bin(%(step)s, bucket_start, %(origin)s) AS start,
       sum(done)::bigint AS done, sum(failed)::bigint AS failed, sum(dead)::bigint AS dead,
       max(lag_seconds) AS lag_seconds
  FROM eventbus_rollup
 WHERE bucket_start >= %(since)s AND bucket_start < %(until)s
   AND (%(consumer)s::text IS NULL OR consumer = %(consumer)s::text)
   AND (%(organization)s::uuid IS NULL OR organization_id = %(organization)s::uuid)
 GROUP BY 1
 ORDER BY 1
