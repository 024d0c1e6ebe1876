"""The system organization (owner of cron.* events) and the dramatiq-postgres queue schema."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import migrations

SYSTEM_ORGANIZATION_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def create_system_organization(apps: Any, schema_editor: Any) -> None:
    Organization = apps.get_model("core", "Organization")
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
    # Written as the `deskcomm` app's migration; an install that applied it there has this one.
    replaces = [("deskcomm", "0006_system_organization_job_queue")]

    dependencies = [("core", "0005_orders_job_runs")]

    operations = [
        migrations.RunPython(create_system_organization, migrations.RunPython.noop),
        migrations.RunPython(create_job_queue_schema, migrations.RunPython.noop),
    ]
