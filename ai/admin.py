"""Admin screens: the knowledge base (saving re-indexes through the bus), AI accounts (budget,
retention, the organization's own key, shown never), daily usage, chunks and the model
provider's health pings (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse

from ai import services
from ai.models import AiAccount, AiUsageDaily, Chunk, KnowledgeArticle, ProviderHealth
from core.admin_scope import scope_queryset
from core.admin_tables import ReadOnlyAdmin


@admin.register(KnowledgeArticle)
class KnowledgeArticleAdmin(admin.ModelAdmin):
    list_display = ["title", "organization", "published", "updated_at"]
    list_filter = ["published", "organization"]
    search_fields = ["title", "body"]
    readonly_fields = ["created_at", "updated_at"]
    actions = ["delete_and_unindex"]

    def save_model(
        self, request: HttpRequest, obj: KnowledgeArticle, form: Any, change: bool
    ) -> None:
        services.article_save(article=obj)

    def delete_model(self, request: HttpRequest, obj: KnowledgeArticle) -> None:
        services.article_delete(article=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[KnowledgeArticle]) -> None:
        for article in queryset:
            services.article_delete(article=article)

    @admin.action(description="Delete selected articles and their index chunks")
    def delete_and_unindex(
        self, request: HttpRequest, queryset: QuerySet[KnowledgeArticle]
    ) -> None:
        self.delete_queryset(request, queryset)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # our action deletes through the service
        return actions


class AiAccountForm(forms.ModelForm):
    new_api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput,
        help_text="The organization's own provider key (stored encrypted; empty: keep the "
        "current one, or use AI_API_KEY when none is stored).",
    )

    class Meta:
        model = AiAccount
        fields = ["organization", "daily_budget_cents", "media_retention_days"]

    def save(self, commit: bool = True) -> AiAccount:
        account: AiAccount = super().save(commit=False)
        if self.cleaned_data.get("new_api_key"):
            account.api_key = self.cleaned_data["new_api_key"]
        if commit:
            account.save()
        return account


@admin.register(AiAccount)
class AiAccountAdmin(admin.ModelAdmin):
    form = AiAccountForm
    list_display = [
        "organization",
        "daily_budget_cents",
        "spent_cents",
        "spent_day",
        "has_own_key",
        "throttled_at",
    ]
    readonly_fields = [
        "spent_day",
        "spent_cents",
        "calls",
        "tokens_in",
        "tokens_out",
        "warned_at",
        "throttled_at",
        "updated_at",
    ]

    @admin.display(boolean=True, description="own key")
    def has_own_key(self, obj: AiAccount) -> bool:
        return bool(obj.api_key_encrypted)

    def save_model(self, request: HttpRequest, obj: AiAccount, form: Any, change: bool) -> None:
        if not change:
            from ai.budget import local_today

            obj.spent_day = local_today()
        super().save_model(request, obj, form, change)


@admin.register(AiUsageDaily)
class AiUsageDailyAdmin(ReadOnlyAdmin):
    """Finished days (`daily-budget-reset` writes each at midnight in AI_BUDGET_TIME_ZONE); the
    day still open is on each organization's AI account, shown above the list."""

    list_display = ["day", "organization", "spent_cents", "budget_cents", "calls", "throttled"]
    list_filter = ["throttled"]
    date_hierarchy = "day"
    change_list_template = "admin/ai/aiusagedaily/change_list.html"

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {"open_days": open_days(request), **(extra_context or {})}
        return super().changelist_view(request, extra)


def open_days(request: HttpRequest) -> list[AiAccount]:
    """The AI accounts with spend or calls on their open (not yet snapshotted) day, in the
    organizations this admin user sees."""
    accounts = AiAccount.objects.filter(Q(calls__gt=0) | Q(spent_cents__gt=0))
    accounts = scope_queryset(request, accounts.select_related("organization"))
    return list(accounts.order_by("-spent_cents")[:OPEN_DAYS_SHOWN])


OPEN_DAYS_SHOWN = 50


@admin.register(ProviderHealth)
class ProviderHealthAdmin(ReadOnlyAdmin):
    list_display = ["checked_at", "ok", "latency_ms", "consecutive_failures", "error"]
    list_filter = ["ok"]


@admin.register(Chunk)
class ChunkAdmin(ReadOnlyAdmin):
    list_display = ["id_short", "organization", "source_kind", "source_id", "ordinal", "version"]
    list_filter = ["source_kind"]
    exclude = ["embedding"]
    search_fields = ["source_id"]

    @admin.display(description="id")
    def id_short(self, obj: Chunk) -> str:
        return obj.pk[:12]
