-- name: mark_redelivered
-- Reaped deliveries that were charged (nack.sql ran first, in the same transaction): their
-- next run says it is a redelivery, and runs alone, since its worker died while running it.
UPDATE eventbus_delivery
   SET redelivered = true, redelivery_reason = %(reason)s, isolate = (status = 'pending')
 WHERE id = ANY(%(ids)s::bigint[])
