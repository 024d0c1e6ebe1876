"""API key lookup for a transaction-mode pooler (core.pooler): the same lookup as
`deskcomm_api_key_authenticate(text)` (migration 0008), but the tenant scope it sets can be
transaction-local, so a pooled server session never keeps it after the caller's transaction."""

from __future__ import annotations

from django.db import migrations

AUTHENTICATE_SQL = """
CREATE FUNCTION deskcomm_api_key_authenticate(p_prefix text, p_local boolean)
RETURNS SETOF deskcomm_apikey
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_bypass text := coalesce(current_setting('app.rls_bypass', true), '');
    v_key deskcomm_apikey%ROWTYPE;
BEGIN
    PERFORM set_config('app.rls_bypass', 'on', true);
    SELECT * INTO v_key FROM deskcomm_apikey WHERE prefix = p_prefix;
    PERFORM set_config('app.rls_bypass', v_bypass, true);
    IF v_key.id IS NULL THEN
        RETURN;
    END IF;
    PERFORM set_config('app.organization_id', v_key.organization_id::text, p_local);
    PERFORM set_config('app.rls_bypass', 'off', p_local);
    RETURN NEXT v_key;
END
$$;
"""


class Migration(migrations.Migration):
    dependencies = [("core", "0011_worker_registry")]

    operations = [
        migrations.RunSQL(
            AUTHENTICATE_SQL, "DROP FUNCTION deskcomm_api_key_authenticate(text, boolean);"
        ),
    ]
