"""A pipeline's definition as its author wrote it (key order and layout; jsonb keeps neither)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("pipelines", "0002_pipeline_secret_headers")]

    operations = [
        migrations.AddField(
            model_name="pipeline",
            name="definition_source",
            field=models.TextField(blank=True, default="", editable=False),
        ),
    ]
