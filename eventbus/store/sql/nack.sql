-- name: nack
-- Record failed attempts: retry at a time, or dead, from per-row parallel arrays.
--
-- Fenced by the claim's lease token. Each failure goes into the attempt log; the events'
-- summary gets the error, and `dead` when one died (event rows locked in id order, carrying
-- the per-event aggregates in one pass, as in ack.sql). A publish failure (the relay could not
-- hand the delivery to the broker) gives the claimed attempt back, since the consumer never
-- ran, and counts towards OUTBOX_MAX_ATTEMPTS instead. A delivery that failed on its own has
-- shown it does not kill its worker: `isolate` is cleared so its retry joins ordinary claims.
-- The handler's traceback (bounded and redacted by eventbus/store/tracebacks.py; '' when there is
-- none: a publish failure, an expired lease, an HTTP answer) goes with the attempt row only.
WITH v AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(dead)s::bool[], %(next_at)s::timestamptz[],
                         %(errors)s::text[], %(classes)s::text[], %(durations)s::int[],
                         %(publish)s::bool[], %(tracebacks)s::text[])
           AS v(id, dead, next_at, error, error_class, duration_ms, publish, traceback)
), nacked AS (
    UPDATE eventbus_delivery d
       SET status = CASE WHEN v.dead THEN 'dead' ELSE 'pending' END,
           next_attempt_at = CASE WHEN v.dead THEN d.next_attempt_at ELSE v.next_at END,
           attempts = d.attempts - v.publish::int,
           publish_failures = d.publish_failures + v.publish::int,
           locked_until = NULL, lease_token = NULL, last_error = v.error,
           error_class = v.error_class, isolate = false, updated_at = %(now)s,
           finished_at = CASE WHEN v.dead THEN %(now)s::timestamptz END
      FROM v
     WHERE d.id = v.id AND d.lease_token = %(token)s AND d.status = 'processing'
    RETURNING d.id, d.event_id, d.organization_id, d.consumer, d.event_created_at,
              d.attempts + v.publish::int AS attempt,
              v.dead, v.next_at, v.error, v.error_class, v.duration_ms, v.publish, v.traceback
), history AS (
    -- event_created_at: the delivery's partition key, which its attempts share.
    INSERT INTO eventbus_deliveryattempt (delivery_id, attempt, outcome, error_class, error,
                                          duration_ms, worker, created_at, event_created_at,
                                          traceback)
    SELECT id, attempt, CASE WHEN dead THEN 'dead' ELSE 'retry' END, error_class, error,
           duration_ms, %(worker)s, %(now)s, event_created_at, nullif(traceback, '')
      FROM nacked
), by_event AS (
    SELECT event_id, count(*) AS failures, bool_or(dead) AS any_dead, max(error) AS error,
           min(next_at) FILTER (WHERE NOT dead) AS next_at
      FROM nacked GROUP BY event_id
), locked AS MATERIALIZED (
    SELECT e.id, p.failures, p.any_dead, p.error, p.next_at
      FROM event_log e JOIN by_event p ON p.event_id = e.id
     ORDER BY e.id
       FOR UPDATE OF e
), summary AS (
    UPDATE event_log e
       SET attempts = least(e.attempts + l.failures, 32767), last_error = l.error,
           status = CASE WHEN l.any_dead THEN 'dead' ELSE e.status END,
           next_attempt_at = coalesce(l.next_at, e.next_attempt_at), updated_at = %(now)s
      FROM locked l
     WHERE e.id = l.id
), rollup AS (
    -- One upsert of the rows changed (as in ack.sql): `failed` counts attempts to be retried,
    -- `dead` those that dead-lettered; a publish failure is the broker's, not the consumer's,
    -- so it counts only when it kills the delivery.
    INSERT INTO eventbus_rollup AS r (bucket_start, consumer, organization_id, shard, failed,
                                      dead)
    SELECT date_trunc('minute', %(now)s::timestamptz, 'UTC'), consumer, organization_id,
           pg_backend_pid(), count(*) FILTER (WHERE NOT dead AND NOT publish),
           count(*) FILTER (WHERE dead)
      FROM nacked GROUP BY consumer, organization_id
    HAVING count(*) FILTER (WHERE dead OR NOT publish) > 0
     ORDER BY consumer, organization_id
        ON CONFLICT (bucket_start, consumer, organization_id, shard)
        DO UPDATE SET failed = r.failed + excluded.failed, dead = r.dead + excluded.dead
)
SELECT id AS delivery_id, event_id, organization_id, consumer, attempt, dead, error
  FROM nacked
