"""The job records, moved here from `core` (formerly the `deskcomm` app) with their tables.

Their tables keep the names the `deskcomm` app gave them (`db_table`), so every step of the move
is state only: no table, column, index, constraint, trigger or row changes."""

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("core", "0008_row_level_security"),
    ]

    operations = [
        # State only: the tables stay as they are (see the docstring).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DefaultSchedule",
                    fields=[
                        ("name", models.TextField(primary_key=True, serialize=False)),
                        ("fingerprint", models.TextField()),
                        ("installed_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        "db_table": "deskcomm_defaultschedule",
                    },
                ),
                migrations.CreateModel(
                    name="JobRun",
                    fields=[
                        (
                            "id",
                            models.UUIDField(
                                default=uuid.uuid4,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("job", models.TextField()),
                        ("slot", models.TextField(blank=True, null=True)),
                        ("trigger", models.TextField()),
                        (
                            "status",
                            models.TextField(
                                choices=[
                                    ("running", "Running"),
                                    ("completed", "Completed"),
                                    ("failed", "Failed"),
                                ]
                            ),
                        ),
                        ("attempt", models.SmallIntegerField(default=1)),
                        ("rows_processed", models.BigIntegerField(blank=True, null=True)),
                        ("duration_ms", models.IntegerField(blank=True, null=True)),
                        ("error", models.TextField(blank=True, default="")),
                        ("started_at", models.DateTimeField()),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        "db_table": "deskcomm_jobrun",
                        "indexes": [
                            models.Index(
                                fields=["job", "-started_at"], name="jobrun_job_started_idx"
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("slot__isnull", False)),
                                fields=("job", "slot"),
                                name="jobrun_slot_uniq",
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
