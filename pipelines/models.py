"""Pipelines as data (seed 004): a per-organization pipeline (trigger, enabled, nodes and edges),
the hosts its `http-request` nodes may call, and the tracking of each run: one execution per
(pipeline, event) and one row per step."""

from __future__ import annotations

import json
import uuid
from typing import Any, ClassVar

from django.db import models

from core.models import Organization


class RunStatus(models.TextChoices):
    """An execution's or a step's status."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class Pipeline(models.Model):
    """A definition (`{"nodes": [...], "edges": [...]}`) run on its trigger: `order.pre`,
    `order.post` or `event.<type>`. At most one enabled pipeline per trigger and organization."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="pipelines"
    )
    name = models.CharField(max_length=200)
    trigger = models.CharField(max_length=120)
    enabled = models.BooleanField(default=True)
    # Secret header values are not in `definition` (it holds pipelines.secrets.MASK there): they
    # are here, encrypted (context pipeline_secrets).
    definition = models.JSONField(default=dict)
    # The definition as its author wrote it (key order, layout; secret header values masked):
    # jsonb keeps neither, so the editor and the API show this text (pipelines.services).
    definition_source = models.TextField(blank=True, default="", editable=False)
    secret_headers_encrypted = models.TextField(blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("created_at", "id")
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "trigger"],
                condition=models.Q(enabled=True),
                name="pipeline_one_enabled_per_trigger",
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.trigger})"

    @property
    def authored_source(self) -> str | None:
        """`definition_source` while it still reads as `definition` (None: no text, or the
        definition was changed without one)."""
        try:
            return self.definition_source if self._authored() == self.definition else None
        except ValueError:
            return None

    @property
    def authored_definition(self) -> Any:
        """The definition in its author's key order, else as stored (jsonb's key order)."""
        return self._authored() if self.authored_source else self.definition

    def _authored(self) -> Any:
        return json.loads(self.definition_source) if self.definition_source else None

    def secret_headers(self) -> dict[str, dict[str, str]]:
        """The decrypted secret header values, by node id and header name."""
        from pipelines import secrets

        return secrets.unseal(self.secret_headers_encrypted)


class AllowedHost(models.Model):
    """A host an organization's `http-request` nodes may call (exact name, or `*.example.com`
    for its subdomains). No row: every http-request of the organization is refused."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="pipeline_hosts"
    )
    host = models.CharField(max_length=253)
    note = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("host",)
        constraints = [
            models.UniqueConstraint(fields=["organization", "host"], name="pipeline_host_uniq")
        ]

    def __str__(self) -> str:
        return self.host


class Execution(models.Model):
    """One run of a pipeline for one event (or, for order.pre, one order request).

    Idempotent per (pipeline, event): a retried delivery resumes the same execution.
    """

    # Step excerpts hold what the nodes rendered (order numbers, totals, a receiver's answer),
    # never the customer's identity: the engine's context carries no customer fields.
    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    Status = RunStatus

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="pipeline_executions"
    )
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="executions")
    trigger = models.CharField(max_length=120)
    event_id = models.UUIDField(null=True, blank=True)
    order_id = models.UUIDField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    attempts = models.PositiveIntegerField(default=1)
    failed_node = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "pipeline_execution"
        ordering = ("-started_at", "-id")
        constraints = [
            models.UniqueConstraint(
                fields=["pipeline", "event_id"],
                condition=models.Q(event_id__isnull=False),
                name="pipeline_execution_once_per_event",
            )
        ]
        indexes = [models.Index(fields=["pipeline", "-started_at"], name="pipeline_exec_recent")]

    def __str__(self) -> str:
        return f"{self.trigger} {self.status} ({self.id})"


class Step(models.Model):
    """One node of an execution: status, attempts, duration, bounded input/output, error."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    Status = RunStatus

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="pipeline_steps"
    )
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="steps")
    node_id = models.CharField(max_length=64)
    node_type = models.CharField(max_length=32)
    position = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices)
    attempts = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    input_excerpt = models.TextField(blank=True, default="")
    output_excerpt = models.TextField(blank=True, default="")
    # The node's full output (bounded by the engine), so a resumed run can reuse it.
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        db_table = "pipeline_step"
        ordering = ("position", "id")
        constraints = [
            models.UniqueConstraint(fields=["execution", "node_id"], name="pipeline_step_uniq")
        ]

    def __str__(self) -> str:
        return f"{self.node_id} {self.status}"
