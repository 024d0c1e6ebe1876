"""Indexes for the operations console, built CONCURRENTLY so a deploy never blocks emit or ack.

- delivery_dlq_idx: the DLQ screen (newest deaths first, "died at" periods), dead rows only.
- delivery_consumer_finished_idx replaces delivery_consumer_status_idx (same prefix) and adds
  finished_at for the status page's "done in the last hour per consumer".
- event_log_request_idx: the correlation view and search by request id.
- event_log_type_created_idx: the event browser filtered by type across organizations.
- delivery_dead_error_idx: the DLQ's error-class filter choices, dead rows only.
- event_log_dead_created_idx: the event browser's "dead" filter across organizations.
"""

import django.db.models.fields.json
from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("eventbus", "0008_delivery_event_type"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="eventlog",
            index=models.Index(
                fields=["event_type", "-created_at"], name="event_log_type_created_idx"
            ),
        ),
        AddIndexConcurrently(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "dead")),
                fields=["-finished_at", "-id"],
                include=["event_type", "organization_id", "consumer"],
                name="delivery_dlq_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="delivery",
            index=models.Index(
                fields=["consumer", "status", "finished_at"],
                name="delivery_consumer_finished_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="eventlog",
            index=models.Index(
                condition=models.Q(("status", "dead")),
                fields=["-created_at"],
                name="event_log_dead_created_idx",
            ),
        ),
        AddIndexConcurrently(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status", "dead")),
                fields=["error_class"],
                name="delivery_dead_error_idx",
            ),
        ),
        RemoveIndexConcurrently(
            model_name="delivery",
            name="delivery_consumer_status_idx",
        ),
        AddIndexConcurrently(
            model_name="eventlog",
            index=models.Index(
                django.db.models.fields.json.KeyTextTransform("request_id", "metadata"),
                condition=models.Q(("metadata__has_key", "request_id")),
                name="event_log_request_idx",
            ),
        ),
    ]
