"""API keys, idempotency keys and the (unlogged) throttle state of the integration API."""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    # Written as the `deskcomm` app's migration; an install that applied it there has this one.
    replaces = [("deskcomm", "0004_api_keys_idempotency_throttle")]

    dependencies = [
        ("core", "0003_audit_log"),
    ]

    operations = [
        migrations.CreateModel(
            name="ThrottleState",
            fields=[
                ("key", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("tat", models.DateTimeField()),
            ],
            options={"db_table": "deskcomm_throttlestate"},
        ),
        migrations.CreateModel(
            name="ApiKey",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=100)),
                ("prefix", models.CharField(max_length=32, unique=True)),
                ("secret_hash", models.CharField(max_length=64)),
                (
                    "scopes",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.TextField(), blank=True, default=list, size=None
                    ),
                ),
                ("created_by", models.CharField(blank=True, default="", max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_keys",
                        to="core.organization",
                    ),
                ),
            ],
            options={
                "db_table": "deskcomm_apikey",
                "verbose_name": "API key",
                "ordering": ["organization_id", "name"],
            },
        ),
        migrations.CreateModel(
            name="IdempotencyKey",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("scope", models.CharField(max_length=100)),
                ("key", models.CharField(max_length=255)),
                ("request_hash", models.CharField(max_length=64)),
                ("status_code", models.SmallIntegerField(null=True)),
                ("response", models.JSONField(null=True)),
                ("created_at", models.DateTimeField()),
                (
                    "organization",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="core.organization",
                    ),
                ),
            ],
            options={
                "db_table": "deskcomm_idempotencykey",
                "indexes": [models.Index(fields=["created_at"], name="idempotency_created_idx")],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("organization", "scope", "key"), name="idempotency_key_uniq"
                    )
                ],
            },
        ),
        # Rate-limit state is ephemeral: no WAL (and so no flush) for the upsert every request makes.
        migrations.RunSQL(
            "ALTER TABLE deskcomm_throttlestate SET UNLOGGED",
            reverse_sql="ALTER TABLE deskcomm_throttlestate SET LOGGED",
        ),
    ]
