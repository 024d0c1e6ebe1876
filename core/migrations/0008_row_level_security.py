"""Row-level security on every tenant table (core.rls): a row is visible, and writable, only
to a session that set the bypass or whose tenant is the row's organization. FORCE applies it to
the tables' owner too (the application role runs the migrations and owns them)."""

from __future__ import annotations

from django.db import migrations

# The settings are read once per statement (the scalar subqueries become init plans), not per row.
BYPASS = "(SELECT current_setting('app.rls_bypass', true)) = 'on'"
TENANT = "(SELECT nullif(current_setting('app.organization_id', true), '')::uuid)"
BY_ORGANIZATION = f"{BYPASS} OR organization_id = {TENANT}"
# The bus's attempt history has no organization column: a row follows its delivery's visibility.
BY_DELIVERY = f"{BYPASS} OR EXISTS (SELECT 1 FROM eventbus_delivery d WHERE d.id = delivery_id)"

TENANT_TABLES = {
    "event_log": BY_ORGANIZATION,
    "eventbus_delivery": BY_ORGANIZATION,
    "eventbus_deliveryattempt": BY_DELIVERY,
    "webhooks_subscription": BY_ORGANIZATION,
    "webhooks_attempt": BY_ORGANIZATION,
    "lgpd_datarequest": BY_ORGANIZATION,
    "deskcomm_contact": BY_ORGANIZATION,
    "deskcomm_conversation": BY_ORGANIZATION,
    "deskcomm_message": BY_ORGANIZATION,
    "deskcomm_consentrecord": BY_ORGANIZATION,
    "deskcomm_lead": BY_ORGANIZATION,
    "deskcomm_leadactivity": BY_ORGANIZATION,
    "deskcomm_order": BY_ORGANIZATION,
    "deskcomm_apikey": BY_ORGANIZATION,
    "deskcomm_auditlog": BY_ORGANIZATION,
    "deskcomm_idempotencykey": BY_ORGANIZATION,
}


def enable_sql(table: str, condition: str) -> str:
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
        f"CREATE POLICY tenant_wall ON {table} USING ({condition}) WITH CHECK ({condition});"
    )


def disable_sql(table: str) -> str:
    return (
        f"DROP POLICY tenant_wall ON {table};\n"
        f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;\n"
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
    )


# API authentication: the key is found by its public prefix before any tenant is known, so the
# lookup bypasses for its own statement only (the previous value is put back), then scopes the
# session to the key's organization. One round trip; the caller still checks the secret's hash
# and revocation (a request that fails them ends with a 401 and its scope is reset).
AUTHENTICATE_SQL = """
CREATE FUNCTION deskcomm_api_key_authenticate(p_prefix text) RETURNS SETOF deskcomm_apikey
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
    PERFORM set_config('app.organization_id', v_key.organization_id::text, false);
    PERFORM set_config('app.rls_bypass', 'off', false);
    RETURN NEXT v_key;
END
$$;
"""


class Migration(migrations.Migration):
    # Written as the `deskcomm` app's migration; an install that applied it there has this one.
    replaces = [("deskcomm", "0008_row_level_security")]

    dependencies = [
        ("core", "0007_lgpd_personal_data"),
        ("eventbus", "0013_attempt_created_index"),
        ("webhooks", "0003_wildcards_skip_sensitive"),
        ("lgpd", "0002_export_links_and_expiry"),
    ]

    operations = [
        *(
            migrations.RunSQL(enable_sql(table, condition), disable_sql(table))
            for table, condition in TENANT_TABLES.items()
        ),
        migrations.RunSQL(AUTHENTICATE_SQL, "DROP FUNCTION deskcomm_api_key_authenticate(text);"),
    ]
