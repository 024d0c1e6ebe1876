-- name: index_counts
-- The numbers the admin index opens on (eventbus/templatetags/ops_index.py): deliveries ready to
-- run now, deliveries waiting for a retry, dead letters, the last hour's events (the platform's
-- own `cron.*` events left out, as in the event browser) and the worker processes alive.
--
-- Each bus count stops at %(cap)s rows (the index then says "100,000+"; the bus status page has
-- the exact figures), so it reads at most that many index entries whatever the tables' size:
-- pending rows from their partial index (delivery_claim_idx), dead ones from theirs
-- (delivery_dlq_idx, delivery_dead_org_idx for one organization), the hour's events from
-- event_log_created_idx (event_log_org_created_idx). %(everywhere)s false limits the bus counts
-- to %(organization)s (organization-scoped staff; NULL: a closed scope, all zero), on top of the
-- tenant wall that already scopes their session.
-- Row: (ready, retrying, dead, events_last_hour, workers_alive).
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM eventbus_delivery
         WHERE status = 'pending' AND next_attempt_at <= %(now)s
           AND (%(everywhere)s OR organization_id = %(organization)s)
         LIMIT %(cap)s) ready),
    (SELECT count(*) FROM (
        SELECT 1 FROM eventbus_delivery
         WHERE status = 'pending' AND next_attempt_at > %(now)s AND attempts > 0
           AND (%(everywhere)s OR organization_id = %(organization)s)
         LIMIT %(cap)s) retrying),
    (SELECT count(*) FROM (
        SELECT 1 FROM eventbus_delivery
         WHERE status = 'dead' AND (%(everywhere)s OR organization_id = %(organization)s)
         LIMIT %(cap)s) dead),
    (SELECT count(*) FROM (
        SELECT 1 FROM event_log
         WHERE created_at > %(hour_ago)s AND created_at <= %(now)s
           AND organization_id <> %(system)s
           AND (%(everywhere)s OR organization_id = %(organization)s)
         LIMIT %(cap)s) events),
    (SELECT count(*) FROM core_worker_process
      WHERE stopped_at IS NULL AND heartbeat_at >= %(alive_since)s)
