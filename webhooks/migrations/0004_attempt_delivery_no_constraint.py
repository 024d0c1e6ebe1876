"""The attempt log's key to its delivery loses its database constraint (eventbus 0022): a
partitioned delivery table's primary key is (id, event_created_at). Django still cascades."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("eventbus", "0022_delivery_event_created_at"),
        ("webhooks", "0003_wildcards_skip_sensitive"),
    ]

    operations = [
        migrations.AlterField(
            model_name="attempt",
            name="delivery",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="webhook_attempts",
                to="eventbus.delivery",
            ),
        ),
    ]
