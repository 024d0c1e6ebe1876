"""The CRM records, moved here from `core` (formerly the `deskcomm` app) with their tables.

Their tables keep the names the `deskcomm` app gave them (`db_table`), so every step of the move
is state only: no table, column, index, constraint, trigger or row changes."""

import uuid

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("core", "0009_move_out_fields"),
    ]

    operations = [
        # State only: the tables stay as they are (see the docstring).
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Contact",
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
                        ("name", models.CharField(blank=True, max_length=200)),
                        ("phone", models.CharField(blank=True, max_length=32)),
                        ("email", models.EmailField(blank=True, max_length=254)),
                        ("cpf_encrypted", models.TextField(blank=True, default="")),
                        ("anonymized_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="contacts",
                                to="core.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deskcomm_contact",
                    },
                ),
                migrations.CreateModel(
                    name="Conversation",
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
                        ("channel", models.CharField(default="whatsapp", max_length=32)),
                        (
                            "external_chat_id",
                            models.CharField(blank=True, default="", max_length=200),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "contact",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="conversations",
                                to="crm.contact",
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="conversations",
                                to="core.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deskcomm_conversation",
                    },
                ),
                migrations.CreateModel(
                    name="Lead",
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
                        ("name", models.CharField(max_length=200)),
                        ("source", models.CharField(default="manual", max_length=50)),
                        ("pipeline_id", models.CharField(default="default", max_length=64)),
                        ("stage_id", models.CharField(default="new", max_length=64)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        (
                            "contact",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="leads",
                                to="crm.contact",
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="leads",
                                to="core.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deskcomm_lead",
                    },
                ),
                migrations.CreateModel(
                    name="LeadActivity",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("kind", models.CharField(default="note", max_length=32)),
                        ("note", models.TextField(blank=True, default="")),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "lead",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="activities",
                                to="crm.lead",
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="core.organization",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name_plural": "lead activities",
                        "db_table": "deskcomm_leadactivity",
                    },
                ),
                migrations.CreateModel(
                    name="Message",
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
                        (
                            "direction",
                            models.TextField(
                                choices=[("inbound", "Inbound"), ("outbound", "Outbound")]
                            ),
                        ),
                        ("body", models.TextField(blank=True, default="")),
                        ("media_urls", models.JSONField(blank=True, default=list)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "conversation",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="messages",
                                to="crm.conversation",
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="core.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deskcomm_message",
                    },
                ),
                migrations.CreateModel(
                    name="ConsentRecord",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("consent_type", models.CharField(max_length=64)),
                        ("granted", models.BooleanField()),
                        ("source", models.CharField(max_length=64)),
                        ("evidence", models.TextField(blank=True, default="")),
                        ("recorded_at", models.DateTimeField()),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="core.organization",
                            ),
                        ),
                        (
                            "contact",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="consents",
                                to="crm.contact",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deskcomm_consentrecord",
                        "indexes": [
                            models.Index(
                                fields=["contact", "-recorded_at"], name="consent_contact_idx"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Order",
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
                        ("number", models.CharField(max_length=64)),
                        ("total_cents", models.BigIntegerField()),
                        ("currency", models.CharField(default="BRL", max_length=3)),
                        ("items", models.JSONField(blank=True, default=list)),
                        ("customer_name", models.CharField(blank=True, default="", max_length=200)),
                        (
                            "customer_email",
                            models.CharField(blank=True, default="", max_length=254),
                        ),
                        ("customer_phone", models.CharField(blank=True, default="", max_length=32)),
                        ("shipping_address", models.TextField(blank=True, default="")),
                        (
                            "status",
                            models.TextField(
                                choices=[("draft", "Draft"), ("confirmed", "Confirmed")],
                                default="draft",
                            ),
                        ),
                        ("confirmed_at", models.DateTimeField(blank=True, null=True)),
                        ("post_processed_at", models.DateTimeField(blank=True, null=True)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "contact",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="orders",
                                to="crm.contact",
                            ),
                        ),
                        (
                            "organization",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="orders",
                                to="core.organization",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "deskcomm_order",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("organization", "number"), name="order_number_uniq"
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
