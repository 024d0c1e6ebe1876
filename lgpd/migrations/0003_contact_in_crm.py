"""A data request's contact is now `crm.Contact` (the same table: state only)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("crm", "0001_initial"),
        ("lgpd", "0002_export_links_and_expiry"),
    ]

    operations = [
        # State only: the tables stay as they are (see the docstring).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="datarequest",
                    name="contact",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="data_requests",
                        to="crm.contact",
                    ),
                ),
            ],
        ),
    ]
