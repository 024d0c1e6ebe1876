"""The system organization (owner of cron.* events) and the dramatiq-postgres queue schema."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import migrations

SYSTEM_ORGANIZATION_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def create_system_organization(apps: Any, schema_editor: Any) -> None:
    Organization = apps.get_model("deskcomm", "Organization")
    Organization.objects.get_or_create(
        pk=SYSTEM_ORGANIZATION_ID,
        defaults={"name": "System (platform jobs)", "slug": "system"},
    )


def create_job_queue_schema(apps: Any, schema_editor: Any) -> None:
    # The default job broker (dramatiq-postgres) keeps its queue in the `dramatiq` schema of this
    # database. Created whatever broker is configured, so switching back needs no migration.
    from dramatiq_postgres.schema import init

    with schema_editor.connection.cursor() as cursor:
        init(cursor)


class Migration(migrations.Migration):
    dependencies = [("deskcomm", "0005_orders_job_runs")]

    operations = [
        migrations.RunPython(create_system_organization, migrations.RunPython.noop),
        migrations.RunPython(create_job_queue_schema, migrations.RunPython.noop),
    ]
