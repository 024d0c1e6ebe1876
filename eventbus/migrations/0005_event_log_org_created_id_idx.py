"""event_log_org_created_idx gains `id`: keyset pages over (created_at, id) read O(limit) rows."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("eventbus", "0004_org_routes"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="eventlog",
            name="event_log_org_created_idx",
        ),
        migrations.AddIndex(
            model_name="eventlog",
            index=models.Index(
                fields=["organization", "-created_at", "-id"], name="event_log_org_created_idx"
            ),
        ),
    ]
