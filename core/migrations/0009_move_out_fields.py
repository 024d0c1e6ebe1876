"""The layering split moved the CRM records to `crm` and the job records to `jobs`.

Their tables keep the names the `deskcomm` app gave them (`db_table`), so every step of the move
is state only: no table, column, index, constraint, trigger or row changes."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0008_row_level_security"),
    ]

    operations = [
        # State only: the tables stay as they are (see the docstring).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="consentrecord",
                    name="contact",
                ),
                migrations.RemoveField(
                    model_name="consentrecord",
                    name="organization",
                ),
                migrations.RemoveField(
                    model_name="contact",
                    name="organization",
                ),
                migrations.RemoveField(
                    model_name="conversation",
                    name="contact",
                ),
                migrations.RemoveField(
                    model_name="lead",
                    name="contact",
                ),
                migrations.RemoveField(
                    model_name="order",
                    name="contact",
                ),
                migrations.RemoveField(
                    model_name="conversation",
                    name="organization",
                ),
                migrations.RemoveField(
                    model_name="message",
                    name="conversation",
                ),
                migrations.DeleteModel(
                    name="DefaultSchedule",
                ),
                migrations.DeleteModel(
                    name="JobRun",
                ),
                migrations.RemoveField(
                    model_name="lead",
                    name="organization",
                ),
                migrations.RemoveField(
                    model_name="leadactivity",
                    name="lead",
                ),
                migrations.RemoveField(
                    model_name="leadactivity",
                    name="organization",
                ),
                migrations.RemoveField(
                    model_name="message",
                    name="organization",
                ),
                migrations.RemoveField(
                    model_name="order",
                    name="organization",
                ),
                migrations.DeleteModel(
                    name="ConsentRecord",
                ),
            ],
        ),
    ]
