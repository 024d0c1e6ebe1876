"""Failure isolation: deliveries that run alone after their worker died, and redelivery marks.

Both flags have database defaults, so the emit statements and `emit_event()` need no change;
adding them rewrites no row (PostgreSQL stores a constant default in the catalog).
"""

from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):
    dependencies = [("eventbus", "0013_attempt_created_index")]

    operations = [
        migrations.AddField(
            model_name="delivery",
            name="isolate",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="delivery",
            name="redelivered",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="delivery",
            name="redelivery_reason",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=Q(status="pending", isolate=True),
                fields=["next_attempt_at"],
                name="delivery_isolated_idx",
            ),
        ),
    ]
