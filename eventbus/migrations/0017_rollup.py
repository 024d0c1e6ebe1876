"""The per-minute rollup of settled outcomes and sampled lag (eventbus.store.models.Rollup).

Written by the settle statements (one upsert in ack.sql and in nack.sql), so it starts empty and
fills from the first settle after this migration (no backfill: the log's history is not read).
Half of each page is kept free so the counter updates stay HOT (no index names a counter). The
table carries organization_id, so it gets the tenant wall of core 0008 (frozen copy below).
"""

from django.db import migrations, models

TENANT_WALL = """
ALTER TABLE eventbus_rollup ENABLE ROW LEVEL SECURITY;
ALTER TABLE eventbus_rollup FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_wall ON eventbus_rollup
 USING ((SELECT current_setting('app.rls_bypass', true)) = 'on'
        OR organization_id = (SELECT nullif(current_setting('app.organization_id', true),
                                            '')::uuid))
 WITH CHECK ((SELECT current_setting('app.rls_bypass', true)) = 'on'
        OR organization_id = (SELECT nullif(current_setting('app.organization_id', true),
                                            '')::uuid));
"""
NO_TENANT_WALL = """
DROP POLICY tenant_wall ON eventbus_rollup;
ALTER TABLE eventbus_rollup NO FORCE ROW LEVEL SECURITY;
ALTER TABLE eventbus_rollup DISABLE ROW LEVEL SECURITY;
"""


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0016_consumer_state")]

    operations = [
        migrations.CreateModel(
            name="Rollup",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "bucket_start",
                        "consumer",
                        "organization_id",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("bucket_start", models.DateTimeField()),
                ("consumer", models.TextField()),
                ("organization_id", models.UUIDField()),
                ("done", models.IntegerField(default=0, db_default=0)),
                ("failed", models.IntegerField(default=0, db_default=0)),
                ("dead", models.IntegerField(default=0, db_default=0)),
                ("lag_seconds", models.FloatField(null=True)),
            ],
            options={"db_table": "eventbus_rollup"},
        ),
        migrations.RunSQL(
            "ALTER TABLE eventbus_rollup SET (fillfactor = 50);",
            "ALTER TABLE eventbus_rollup RESET (fillfactor);",
        ),
        migrations.RunSQL(TENANT_WALL, NO_TENANT_WALL),
    ]
