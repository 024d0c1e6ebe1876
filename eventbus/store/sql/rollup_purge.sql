-- name: rollup_purge
-- Delete rollup rows older than the kept window (EVENTBUS ROLLUP_KEEP_DAYS): a range of the
-- primary key's leading column. Run hourly by the eventbus-rollup-purge job, so each run deletes
-- about an hour of minutes.
DELETE FROM eventbus_rollup WHERE bucket_start < %(before)s
