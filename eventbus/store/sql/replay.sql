-- name: replay
-- Deliver events (again) to one consumer (restored archives, operator replays): a new pending
-- delivery, or the existing one back to pending when it is finished (done, dead, discarded);
-- running ones are left alone. Followed by resummarise.sql in the same transaction.
-- An operator replay (eventbus/history/replays.py) has an id: the deliveries it resets carry it, and a
-- delivery already replayed under that id is not reset again (re-running a replay that was cut
-- off continues it). Archive restores pass none.
-- The event's priority, and for an ordered consumer (%(ordered)s) its ordering key, as at emit:
-- a replayed key runs in delivery id order (a delivery created here comes after the key's
-- existing ones, whatever its event's time).
INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status, attempts,
                               max_attempts, next_attempt_at, created_at, updated_at, replay_id,
                               ordering_key, priority, event_created_at)
SELECT e.id, e.organization_id, %(consumer)s, e.event_type, 'pending', 0, %(max_attempts)s,
       %(now)s, %(now)s, %(now)s, %(replay_id)s::uuid,
       CASE WHEN %(ordered)s::boolean THEN e.ordering_key END, e.priority, e.created_at
  FROM event_log e
 WHERE e.id = ANY(%(ids)s::uuid[])
-- The constraint by name: (event_id, consumer) on a plain table, (event_id, consumer,
-- event_created_at) on a partitioned one (eventbus/history/partitions.py), where a unique constraint must
-- hold the partition key; an event's deliveries all carry its created_at, so both say "one per
-- (event, consumer)".
ON CONFLICT ON CONSTRAINT delivery_event_consumer_uniq DO UPDATE
   SET status = 'pending', attempts = 0, publish_failures = 0, next_attempt_at = %(now)s,
       last_error = NULL, error_class = NULL, locked_until = NULL, lease_token = NULL,
       locked_by = NULL, finished_at = NULL, isolate = false,
           redelivered = false, redelivery_reason = NULL, updated_at = %(now)s,
           replay_id = %(replay_id)s::uuid, ordering_key = EXCLUDED.ordering_key,
           priority = EXCLUDED.priority
 WHERE eventbus_delivery.status IN ('done', 'dead', 'discarded')
   AND (%(replay_id)s::uuid IS NULL
        OR eventbus_delivery.replay_id IS DISTINCT FROM %(replay_id)s::uuid)
RETURNING id, event_id, organization_id, consumer
