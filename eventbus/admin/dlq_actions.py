"""The DLQ's operator actions and their forms: Reprocess, Discard, and the "all matching" page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.admin.views.main import ChangeList
from django.http import HttpRequest

from core import audit
from eventbus.operations import services


@dataclass(frozen=True)
class OperatorAction:
    name: str
    done: str  # past tense, for the result message
    permission: str
    needs_reason: bool
    left: str = ""  # where the letters went: why the DLQ no longer lists them

    def run(self, ids: list[int], *, actor: str, reason: str) -> int:
        if self.name == "discard":
            return services.deliveries_discard(delivery_ids=ids, actor=actor, reason=reason)
        return services.deliveries_reprocess(delivery_ids=ids, actor=actor, reason=reason)


REPROCESS = OperatorAction(
    "reprocess",
    "Reprocessed",
    "eventbus.reprocess_deadletter",
    False,
    "They are back in the queue (pending, due now), so the DLQ no longer lists them.",
)
DISCARD = OperatorAction(
    "discard",
    "Discarded",
    "eventbus.discard_deadletter",
    True,
    "They left the DLQ for good (status discarded), so it no longer lists them.",
)
OPERATOR_ACTIONS = {a.name: a for a in (REPROCESS, DISCARD)}


class DiscardForm(forms.Form):
    reason = forms.CharField(
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Required. Kept in the audit log with your name and the time.",
    )


class MatchingForm(forms.Form):
    """POST of the "all matching" confirmation page."""

    filters = forms.CharField(required=False, max_length=4000, widget=forms.HiddenInput)
    as_of = forms.DateTimeField(widget=forms.HiddenInput)
    reason = forms.CharField(
        required=False, max_length=1000, widget=forms.Textarea(attrs={"rows": 3, "cols": 60})
    )
    enable_disabled = forms.BooleanField(
        required=False,
        label="Enable the disabled consumers listed above first",
        help_text="Each enable is audited; without it their letters die again at once.",
    )

    def __init__(self, *args: Any, action: OperatorAction, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        reason = self.fields["reason"]
        reason.required = action.needs_reason
        reason.label = "Reason" if action.needs_reason else "Note (optional)"
        reason.help_text = "Kept in the audit log with your name and the time."


def actor_of(request: HttpRequest) -> str:
    return audit.user_actor(request)


def describe_filters(changelist: ChangeList) -> list[tuple[str, str]]:
    """(title, chosen value) of each active filter, and the search term, for the operator."""
    described: list[tuple[str, str]] = []
    for spec in changelist.filter_specs:
        parameters = [p for p in spec.expected_parameters() if p]
        unfiltered = changelist.get_query_string(remove=parameters)
        described.extend(
            (str(spec.title), str(choice["display"]))
            for choice in spec.choices(changelist)
            if choice["selected"] and choice["query_string"] != unfiltered
        )
    if changelist.query:
        described.append(("search", changelist.query))
    return described
