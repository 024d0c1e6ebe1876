"""Contacts in the admin: found by name, phone or e-mail, their fields read-only (the CRM and the
LGPD services write them), with their identities, block, merge and redaction state. The CPF is
never shown, only whether one is on file; data requests pick a contact through this admin's
search (autocomplete).

Actions (each through crm.services, audited as the admin user): merge the selected contacts into
one (a confirmation page picks the survivor), block, unblock. They need the change permission
on contacts.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.formats import date_format

from core.admin_tables import ReadOnlyMixin
from core.audit import user_actor
from crm import (
    conversation_admin,  # noqa: F401  (conversations, handoffs, notifications)
    lead_admin,  # noqa: F401  (leads, consents)
    services,
)
from crm.models import Contact, ContactIdentity

REDACTED_FORMAT = "Y-m-d H:i"
MERGE_TEMPLATE = "admin/crm/contact/merge_confirmation.html"


class IdentityInline(ReadOnlyMixin, admin.TabularInline):
    """The contact's identifiers (the CPF's lookup key is not one to show)."""

    model = ContactIdentity
    fields = ("kind", "shown_value", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "identities (phones, e-mails, channel ids)"

    @admin.display(description="value")
    def shown_value(self, obj: ContactIdentity) -> str:
        return "(CPF lookup key)" if obj.kind == ContactIdentity.Kind.CPF else obj.value


class MergeForm(forms.Form):
    into = forms.ModelChoiceField(
        queryset=Contact.objects.none(),
        widget=forms.RadioSelect,
        label="Keep this contact",
        help_text="The others' conversations, messages, orders, leads, consents and "
        "identities move to it; they stay, emptied, pointing at it.",
    )

    def __init__(self, *args: Any, contacts: QuerySet[Contact], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["into"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = contacts
        field.label_from_instance = _label  # type: ignore[method-assign,assignment]


def _label(contact: Contact) -> str:
    parts = [contact.name or "(no name)", contact.phone, contact.email]
    return " · ".join(p for p in parts if p) + f" (since {contact.created_at:%Y-%m-%d})"


@admin.register(Contact)
class ContactAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = (
        "name_or_id",
        "phone",
        "email",
        "organization",
        "state",
        "redaction",
        "created_at",
    )
    list_filter = ("organization",)
    # Name by part (icontains), phone and e-mail by their start: what an operator has at hand.
    search_fields = ("name", "^phone", "^email")
    search_help_text = "Name (any part), phone or e-mail (from the start)."
    list_select_related = ("organization",)
    ordering = ("-created_at",)
    fields = (
        "id",
        "organization",
        "name",
        "phone",
        "email",
        "cpf_on_file",
        "state",
        "merged_into",
        "redaction",
    )
    readonly_fields = fields
    inlines = (IdentityInline,)
    actions = ("merge_selected", "block_selected", "unblock_selected")
    show_facets = admin.ShowFacets.NEVER

    def has_contact_write_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("crm.change_contact"))

    @admin.display(description="name", ordering="name")
    def name_or_id(self, obj: Contact) -> str:
        return obj.name or f"(no name) {str(obj.pk)[:8]}"

    @admin.display(description="CPF")
    def cpf_on_file(self, obj: Contact) -> str:
        return "on file (encrypted, not shown)" if obj.cpf_encrypted else "-"

    @admin.display(description="state")
    def state(self, obj: Contact) -> str:
        if obj.merged_into_id is not None:
            return f"merged into {str(obj.merged_into_id)[:8]}"
        if obj.blocked_at is not None:
            return f"blocked ({obj.blocked_reason or 'operator'})"
        return "active"

    @admin.display(description="redaction", ordering="anonymized_at")
    def redaction(self, obj: Contact) -> str:
        if obj.anonymized_at is None:
            return "not redacted"
        when = date_format(timezone.localtime(obj.anonymized_at), REDACTED_FORMAT)
        return f"redacted {when} UTC"

    @admin.action(description="Merge selected contacts into one…", permissions=["contact_write"])
    def merge_selected(
        self, request: HttpRequest, queryset: QuerySet[Contact]
    ) -> HttpResponse | None:
        contacts = queryset.order_by("created_at")
        if len({c.organization_id for c in contacts}) != 1 or contacts.count() < 2:
            self.message_user(
                request,
                "Select two or more contacts of one organization to merge.",
                messages.ERROR,
            )
            return None
        form = MergeForm(request.POST if "confirm" in request.POST else None, contacts=contacts)
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Merge contacts?",
                "contacts": contacts,
                "form": form,
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, MERGE_TEMPLATE, context)
        into = form.cleaned_data["into"]
        actor = user_actor(request)
        merged = 0
        for source in contacts.exclude(pk=into.pk):
            try:
                services.contact_merge(source=source, into=into, actor=actor)
                merged += 1
            except services.ContactConflict as exc:
                self.message_user(request, f"{source}: {exc}", messages.WARNING)
        self.message_user(request, f"Merged {merged} contact(s) into {into}.", messages.SUCCESS)
        return None

    @admin.action(
        description="Block selected contacts (no more messages)", permissions=["contact_write"]
    )
    def block_selected(self, request: HttpRequest, queryset: QuerySet[Contact]) -> None:
        self._each(
            request, queryset, "Blocked", lambda c, actor: services.contact_block(c, actor=actor)
        )

    @admin.action(
        description="Unblock selected contacts (opt back in)", permissions=["contact_write"]
    )
    def unblock_selected(self, request: HttpRequest, queryset: QuerySet[Contact]) -> None:
        self._each(
            request,
            queryset,
            "Unblocked",
            lambda c, actor: services.contact_unblock(c, actor=actor),
        )

    def _each(
        self, request: HttpRequest, queryset: QuerySet[Contact], done: str, change: Any
    ) -> None:
        actor = user_actor(request)
        changed = 0
        for contact in queryset:
            try:
                change(contact, actor)
                changed += 1
            except services.ContactConflict as exc:
                self.message_user(request, f"{contact}: {exc}", messages.WARNING)
        self.message_user(request, f"{done} {changed} contact(s).", messages.SUCCESS)
