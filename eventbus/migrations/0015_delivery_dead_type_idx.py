"""The DLQ's event-type and organization filters: loose scans of what has dead letters."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("eventbus", "0014_delivery_isolation"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "dead")),
                fields=["event_type"],
                name="delivery_dead_type_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "dead")),
                fields=["organization"],
                name="delivery_dead_org_idx",
            ),
        ),
    ]
