-- emit_wakeup: wake idle workers once for a whole emit_many that holds a high-priority type.
--
-- Delivered when the caller commits (never for a rolled-back emit); one per call, not per event.
SELECT pg_notify(%(channel)s, 'emit_many')
