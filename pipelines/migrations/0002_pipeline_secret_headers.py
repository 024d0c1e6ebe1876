"""Secret header values of pipeline definitions move out of `definition` into an encrypted column
(issue 39): every existing plaintext secret header is sealed and masked in place."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


def seal_existing(apps: Any, schema_editor: Any) -> None:
    from pipelines import secrets

    Pipeline = apps.get_model("pipelines", "Pipeline")  # noqa: N806
    for pipeline in Pipeline.objects.using(schema_editor.connection.alias).iterator():
        masked, found = secrets.split(pipeline.definition)
        if not found:
            continue
        pipeline.definition = masked
        pipeline.secret_headers_encrypted = secrets.seal(found)
        pipeline.save(update_fields=["definition", "secret_headers_encrypted"])


def unseal_existing(apps: Any, schema_editor: Any) -> None:
    from pipelines import secrets

    Pipeline = apps.get_model("pipelines", "Pipeline")  # noqa: N806
    for pipeline in Pipeline.objects.using(schema_editor.connection.alias).exclude(
        secret_headers_encrypted=""
    ):
        pipeline.definition = secrets.restore(
            pipeline.definition, secrets.unseal(pipeline.secret_headers_encrypted)
        )
        pipeline.save(update_fields=["definition"])


class Migration(migrations.Migration):
    dependencies = [("pipelines", "0001_pipelines")]

    operations = [
        migrations.AddField(
            model_name="pipeline",
            name="secret_headers_encrypted",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(seal_existing, unseal_existing),
    ]
