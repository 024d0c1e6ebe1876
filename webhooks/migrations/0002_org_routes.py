"""Plug webhook subscriptions into the bus's fan-out (eventbus_org_routes) and index their
deliveries for listing."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# An enabled subscription of the event's organization whose event_types hold the exact type, its
# entity wildcard ("lead.*") or "*". A ping (webhook.ping) goes only to the subscription named in
# its payload. Served by webhook_sub_fanout_idx; LANGUAGE sql + STABLE lets the planner inline it.
ORG_ROUTES_SQL = """
CREATE OR REPLACE FUNCTION eventbus_org_routes(p_organization_id uuid, p_event_type text,
                                               p_payload jsonb)
RETURNS TABLE (consumer text, max_attempts int, delay_seconds float8)
LANGUAGE sql STABLE
AS $$
SELECT 'webhook:' || s.id::text, s.max_attempts::int, 0::float8
  FROM webhooks_subscription s
 WHERE s.organization_id = p_organization_id AND s.enabled
   AND CASE WHEN p_event_type = 'webhook.ping'
            THEN s.id::text = p_payload ->> 'subscription_id'
            ELSE s.event_types && ARRAY[p_event_type, split_part(p_event_type, '.', 1) || '.*', '*']
       END
$$;
"""

# Reversing restores the bus's empty default.
ORG_ROUTES_EMPTY_SQL = import_module("eventbus.migrations.0004_org_routes").ORG_ROUTES_EMPTY_SQL

# API/admin: an organization's webhook deliveries, newest first (only webhook rows indexed).
DELIVERY_LIST_INDEX_SQL = """
CREATE INDEX webhook_delivery_list_idx ON eventbus_delivery (organization_id, id DESC)
 WHERE consumer LIKE 'webhook:%';
"""


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0001_initial"), ("eventbus", "0004_org_routes")]

    operations = [
        migrations.RunSQL(ORG_ROUTES_SQL, ORG_ROUTES_EMPTY_SQL),
        migrations.RunSQL(DELIVERY_LIST_INDEX_SQL, "DROP INDEX webhook_delivery_list_idx;"),
    ]
