"""The layering split moved the CRM records to `crm` and the job records to `jobs`.

Their tables keep the names the `deskcomm` app gave them (`db_table`), so every step of the move
is state only: no table, column, index, constraint, trigger or row changes."""

from typing import Any

from django.db import migrations

MOVED = {
    "crm": ["contact", "conversation", "message", "consentrecord", "lead", "leadactivity", "order"],
    "jobs": ["jobrun", "defaultschedule"],
    "core": ["organization", "auditlog", "apikey", "idempotencykey", "throttlestate"],
}


def _relabel(apps: Any, old: dict[str, str], new: dict[str, str]) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    for label, models in MOVED.items():
        for model in models:
            if not content_type.objects.filter(app_label=new[label], model=model).exists():
                content_type.objects.filter(app_label=old[label], model=model).update(
                    app_label=new[label]
                )


def adopt_content_types(apps: Any, schema_editor: Any) -> None:
    """Installs from before the split have `deskcomm.<model>` content types: relabel them."""
    _relabel(apps, old=dict.fromkeys(MOVED, "deskcomm"), new={label: label for label in MOVED})


def give_back_content_types(apps: Any, schema_editor: Any) -> None:
    _relabel(apps, old={label: label for label in MOVED}, new=dict.fromkeys(MOVED, "deskcomm"))


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0001_initial"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("core", "0009_move_out_fields"),
        ("lgpd", "0003_contact_in_crm"),
    ]

    operations = [
        # State only: the tables stay as they are (see the docstring).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name="Contact",
                ),
                migrations.DeleteModel(
                    name="Conversation",
                ),
                migrations.DeleteModel(
                    name="Lead",
                ),
                migrations.DeleteModel(
                    name="LeadActivity",
                ),
                migrations.DeleteModel(
                    name="Message",
                ),
                migrations.DeleteModel(
                    name="Order",
                ),
            ],
        ),
        # Content types (and so permissions and admin history) follow their models.
        migrations.RunPython(adopt_content_types, give_back_content_types),
    ]
