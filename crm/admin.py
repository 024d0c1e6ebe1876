"""Contacts in the admin: found by name, phone or e-mail, read-only (the CRM and the LGPD
services write them), with their redaction state. The CPF is never shown, only whether one is
on file; data requests pick a contact through this admin's search (autocomplete)."""

from __future__ import annotations

from django.contrib import admin
from django.utils import timezone
from django.utils.formats import date_format

from core.admin_tables import ReadOnlyMixin
from crm import conversation_admin  # noqa: F401  (conversations, handoffs, notifications)
from crm.models import Contact

REDACTED_FORMAT = "Y-m-d H:i"


@admin.register(Contact)
class ContactAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("name_or_id", "phone", "email", "organization", "redaction", "created_at")
    list_filter = ("organization",)
    # Name by part (icontains), phone and e-mail by their start: what an operator has at hand.
    search_fields = ("name", "^phone", "^email")
    search_help_text = "Name (any part), phone or e-mail (from the start)."
    list_select_related = ("organization",)
    ordering = ("-created_at",)
    fields = ("id", "organization", "name", "phone", "email", "cpf_on_file", "redaction")
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER

    @admin.display(description="name", ordering="name")
    def name_or_id(self, obj: Contact) -> str:
        return obj.name or f"(no name) {str(obj.pk)[:8]}"

    @admin.display(description="CPF")
    def cpf_on_file(self, obj: Contact) -> str:
        return "on file (encrypted, not shown)" if obj.cpf_encrypted else "-"

    @admin.display(description="redaction", ordering="anonymized_at")
    def redaction(self, obj: Contact) -> str:
        if obj.anonymized_at is None:
            return "not redacted"
        when = date_format(timezone.localtime(obj.anonymized_at), REDACTED_FORMAT)
        return f"redacted {when} UTC"
