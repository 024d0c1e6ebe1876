"""Admin screens: the knowledge base (saving re-indexes through the bus), AI accounts (budget,
retention, the organization's own key, shown never), daily usage, chunks and the model
provider's health pings (read-only)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ai import services
from ai.models import AiAccount, AiUsageDaily, Chunk, KnowledgeArticle, ProviderHealth
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
    list_display = ["day", "organization", "spent_cents", "budget_cents", "calls", "throttled"]
    list_filter = ["throttled"]
    date_hierarchy = "day"


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
