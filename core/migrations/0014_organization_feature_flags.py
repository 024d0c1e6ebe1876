"""Per-organization feature flags (seed 001 §5.5; core.flags): a JSON object on the
organization, `{}` by default in the database too (rows inserted by SQL get every default)."""

from __future__ import annotations

from django.db import migrations, models

import core.flags


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0013_database_roles"),
    ]

    operations = [
        migrations.AddField(
            model_name="organization",
            name="feature_flags",
            field=models.JSONField(
                blank=True,
                db_default=models.Value({}, output_field=models.JSONField()),
                default=dict,
                help_text="JSON object of flag: true/false; flags not listed keep their default.",
                validators=[core.flags.validate_feature_flags],
            ),
        ),
    ]
