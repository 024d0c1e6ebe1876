-- emit_existing_by_key: the events that already hold some idempotency keys of an organization.
--
-- emit_many asks for the keys its insert skipped, to return those events' ids in input order.
-- Served by the unique index on (organization_id, idempotency_key).
SELECT id, idempotency_key FROM event_log
 WHERE organization_id = %(org)s AND idempotency_key = ANY(%(keys)s::text[])
