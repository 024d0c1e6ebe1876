"""Leads and consents in the admin.

- Leads: listed by stage, status and owner; created and changed through `crm.services`, so each
  change emits its event (`lead.created`, `lead.updated`, `lead.stage_changed`,
  `lead.assigned`); "Mark won" / "Mark lost" run `mark_lead_won` / `mark_lead_lost`; delete is
  the soft delete (`lead.deleted`). Activities are shown inline and added through
  `lead_activity_record`. Leads pick a contact through the contacts' search (autocomplete).
- Consents: read-only, by contact (recorded through the API or the LGPD services).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html

from core import audit
from core.admin_scope import organizations_of
from core.admin_tables import ReadOnlyMixin
from core.models import StaffOrganization
from crm import services
from crm.models import ConsentRecord, Lead, LeadActivity

CLOSED_FORMAT = "Y-m-d H:i"

LEAD_FIELDS = ("name", "source", "pipeline_id", "contact", "value_cents")


def owner_choices(request: HttpRequest) -> QuerySet[Any]:
    """Active users bound to an organization this admin user sees (a lead's possible owners)."""
    bindings = StaffOrganization.objects.all()
    visible = organizations_of(request)
    if visible is not None:
        bindings = bindings.filter(organization_id__in=visible)
    users = get_user_model().objects.filter(is_active=True)
    return users.filter(pk__in=bindings.values("user_id")).order_by("username")


class LeadForm(forms.ModelForm):
    # Declared here: users are platform-wide rows, which the admin's scoping would hide.
    owner = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        help_text="A user of the lead's organization.",
    )
    value_cents = forms.IntegerField(required=False, min_value=0, label="value (cents)")

    class Meta:
        model = Lead
        fields = ("organization", "name", "source", "pipeline_id", "stage_id", "contact", "owner")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        organization = data.get("organization") or getattr(self.instance, "organization", None)
        if organization is None:
            return data
        contact = data.get("contact")
        if contact is not None and contact.organization_id != organization.pk:
            self.add_error("contact", "This contact belongs to another organization.")
        owner = data.get("owner")
        try:
            services.check_owner(organization.pk, owner.pk if owner else None)
        except services.LeadError as exc:
            self.add_error("owner", str(exc))
        return data


class CloseForm(forms.Form):
    """Mark won (value, optional reason) or lost (reason required)."""

    value_cents = forms.IntegerField(required=False, min_value=0, label="value (cents)")
    reason = forms.CharField(required=False, max_length=500)


class LeadActivityInline(admin.TabularInline):
    """The lead's activities: existing ones read-only, new ones recorded by the service."""

    model = LeadActivity
    fields = ("kind", "note", "created_at")
    readonly_fields = ("created_at",)
    extra = 1
    can_delete = False
    ordering = ("-id",)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Lead)
class LeadAdmin(admin.ModelAdmin):
    form = LeadForm
    list_display = ("name", "stage_id", "status", "owner", "value", "organization", "created_at")
    list_filter = (
        "status",
        "stage_id",
        ("owner", admin.RelatedOnlyFieldListFilter),
        "organization",
    )
    search_fields = ("name",)
    search_help_text = "Lead name (any part)."
    list_select_related = ("owner", "organization")
    ordering = ("-created_at",)
    autocomplete_fields = ("contact",)
    inlines = (LeadActivityInline,)
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 50

    def get_queryset(self, request: HttpRequest) -> QuerySet[Lead]:
        return super().get_queryset(request).filter(deleted_at__isnull=True)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        owner = form.base_fields["owner"]
        assert isinstance(owner, forms.ModelChoiceField)
        owner.queryset = owner_choices(request)
        if obj is not None:
            form.base_fields["value_cents"].initial = obj.value_cents
        return form

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        editable = ["name", "source", "pipeline_id", "stage_id", "contact", "owner", "value_cents"]
        if obj is None:
            return ["organization", *editable]
        return ["organization", *editable, "outcome", "created_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return [] if obj is None else ["organization", "outcome", "created_at"]

    @admin.display(description="value", ordering="value_cents")
    def value(self, obj: Lead) -> str:
        if obj.value_cents is None:
            return "-"
        return f"{obj.value_cents // 100}.{obj.value_cents % 100:02d}"

    @admin.display(description="outcome")
    def outcome(self, obj: Lead) -> str:
        if obj.status == Lead.Status.WON:
            return f"won {_when(obj.won_at)}" + (
                f": {obj.close_reason}" if obj.close_reason else ""
            )
        if obj.status == Lead.Status.LOST:
            return f"lost {_when(obj.lost_at)}: {obj.close_reason}"
        won = reverse("admin:crm_lead_won", args=[obj.pk])
        lost = reverse("admin:crm_lead_lost", args=[obj.pk])
        return format_html(
            'open <a class="button" href="{}">Mark won</a> <a class="button" href="{}">'
            "Mark lost</a>",
            won,
            lost,
        )

    def save_model(self, request: HttpRequest, obj: Lead, form: Any, change: bool) -> None:
        data = form.cleaned_data
        owner_id = data["owner"].pk if data.get("owner") else None
        if not change:
            created = services.lead_create(
                organization=obj.organization_id,
                name=data["name"],
                source=data.get("source") or "manual",
                pipeline_id=data.get("pipeline_id") or "default",
                stage_id=data.get("stage_id") or "new",
                contact=data.get("contact"),
                owner_id=owner_id,
                value_cents=data.get("value_cents"),
            )
            obj.pk = created.pk
            obj._state.adding = False
            return
        lead = Lead.objects.get(pk=obj.pk)
        changed = set(form.changed_data)
        updates = {name: data.get(name) for name in LEAD_FIELDS if name in changed}
        if updates:
            services.lead_update(lead, **updates)
        if "stage_id" in changed:
            services.lead_change_stage(lead, stage_id=data["stage_id"])
        if "owner" in changed:
            services.lead_assign(lead, owner_id=owner_id)

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        for inline in formset.save(commit=False):
            if inline.pk is None:
                services.lead_activity_record(
                    form.instance,
                    kind=inline.kind,
                    note=inline.note,
                )

    def delete_model(self, request: HttpRequest, obj: Lead) -> None:
        services.lead_delete(obj, actor=audit.user_actor(request))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Lead]) -> None:
        for lead in queryset:
            services.lead_delete(lead, actor=audit.user_actor(request))

    def get_urls(self) -> list[Any]:
        close = self.admin_site.admin_view(self.close_view)
        return [
            path("<uuid:object_id>/won/", close, {"outcome": "won"}, name="crm_lead_won"),
            path("<uuid:object_id>/lost/", close, {"outcome": "lost"}, name="crm_lead_lost"),
            *super().get_urls(),
        ]

    def close_view(self, request: HttpRequest, object_id: Any, outcome: str) -> HttpResponse:
        """Mark an open lead won or lost (a small form), through mark_lead_won/mark_lead_lost."""
        lead = self.get_queryset(request).filter(pk=object_id).first()
        if lead is None or not self.has_change_permission(request, lead):
            raise Http404("no such lead")
        form = CloseForm(request.POST or None, initial={"value_cents": lead.value_cents})
        if request.method == "POST" and form.is_valid():
            try:
                if outcome == "won":
                    services.lead_mark_won(
                        lead,
                        value_cents=form.cleaned_data["value_cents"],
                        reason=form.cleaned_data["reason"],
                    )
                else:
                    services.lead_mark_lost(lead, reason=form.cleaned_data["reason"])
            except services.LeadClosed as exc:
                self.message_user(request, str(exc), messages.ERROR)
            except services.LeadError as exc:
                form.add_error(exc.field if exc.field in form.fields else None, str(exc))
            else:
                self.message_user(request, f"“{lead}” was marked {outcome}.")
                return HttpResponseRedirect(reverse("admin:crm_lead_change", args=[lead.pk]))
            if lead.status != Lead.Status.OPEN:
                return HttpResponseRedirect(reverse("admin:crm_lead_change", args=[lead.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": lead,
            "title": f"Mark “{lead}” {outcome}",
            "form": form,
            "outcome": outcome,
        }
        return TemplateResponse(request, "admin/crm/lead/close.html", context)


def _when(stamp: Any) -> str:
    return date_format(timezone.localtime(stamp), CLOSED_FORMAT) + " UTC" if stamp else ""


@admin.register(ConsentRecord)
class ConsentRecordAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("contact", "consent_type", "granted", "source", "recorded_at", "organization")
    list_filter = ("consent_type", "granted", "organization")
    search_fields = ("=contact__id",)
    search_help_text = "The contact's id."
    list_select_related = ("contact", "organization")
    ordering = ("-recorded_at",)
    fields = ("contact", "consent_type", "granted", "source", "evidence", "recorded_at")
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER
