-- part: key_turn, "it is this delivery's turn in its key", an AND clause on the delivery `d`
-- A delivery with an ordering key (its consumer is declared ordered=True) may run only as its
-- key's next: no earlier delivery of the same (consumer, organization, key) pending, none of
-- them running (one delivery_ordering_idx probe, which holds only keyed unfinished rows). A
-- delivery without a key passes at once. Finished rows (done, dead, discarded) release their
-- key. The per-row form: claim.sql (which meets keyed rows only from a consumer ordered once)
-- and the isolated claim (isolated_waiting.sql); claim_ordered.sql finds heads by its walk.
AND (d.ordering_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM eventbus_delivery o
       WHERE o.consumer = d.consumer AND o.organization_id = d.organization_id
         AND o.ordering_key = d.ordering_key AND o.ordering_key IS NOT NULL
         AND o.status IN ('pending', 'processing')
         AND (o.id < d.id OR o.status = 'processing')))
