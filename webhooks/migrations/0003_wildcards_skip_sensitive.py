"""`*` no longer matches the sensitive namespaces: lgpd.* and system.* reach a subscription only
when it lists them (an exact type, or `lgpd.*` / `system.*`)."""

from __future__ import annotations

from importlib import import_module

from django.db import migrations

# As 0002, except that "*" matches only types outside SENSITIVE_NAMESPACES (webhooks.conf). An
# exact type or the namespace's own wildcard still matches.
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
            WHEN split_part(p_event_type, '.', 1) IN ('lgpd', 'system')
            THEN s.event_types && ARRAY[p_event_type, split_part(p_event_type, '.', 1) || '.*']
            ELSE s.event_types && ARRAY[p_event_type, split_part(p_event_type, '.', 1) || '.*', '*']
       END
$$;
"""

PREVIOUS_SQL = import_module("webhooks.migrations.0002_org_routes").ORG_ROUTES_SQL


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0002_org_routes")]

    operations = [migrations.RunSQL(ORG_ROUTES_SQL, PREVIOUS_SQL)]
