"""Admin: connected stores (status, last sync, counts, "resync"), webhook receipts and health.

The store's products and orders are the CRM's (`crm.Product`, `crm.Order`, filtered by
`ns_store_id`); each store row links to them. Tokens are never shown.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from core.audit import user_actor
from crm.models import Order, Product
from nuvemshop import services
from nuvemshop.models import IntegrationHealth, SkippedRecord, Store, WebhookReceipt


@admin.register(Store)
class StoreAdmin(admin.ModelAdmin):
    list_display = (
        "ns_store_id",
        "organization",
        "status_shown",
        "last_sync_at",
        "products_count",
        "customers_count",
        "orders_count",
        "records",
    )
    list_filter = ("status",)
    search_fields = ("ns_store_id", "name")
    actions = ("resync",)
    readonly_fields = (
        "organization",
        "ns_store_id",
        "status",
        "status_reason",
        "scopes",
        "token_checked_at",
        "webhooks_registered_at",
        "last_sync_at",
        "products_count",
        "customers_count",
        "orders_count",
        "carts_polled_at",
        "installed_at",
    )
    fields = ("name", *readonly_fields)
    change_list_template = "nuvemshop/store_changelist.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # stores come from the install flow ("Connect a store")

    @admin.display(description="status")
    def status_shown(self, store: Store) -> str:
        if store.status == Store.Status.CONNECTED:
            return format_html('<span style="color:#060">{}</span>', store.status)
        hint = {
            Store.Status.TOKEN_INVALID: "token refused: reinstall (runbook)",
            Store.Status.UNINSTALLED: "app uninstalled: not syncing",
            Store.Status.SUSPENDED: "app suspended by the shop: not syncing",
            Store.Status.REDACTED: "store data removed (store/redact)",
        }.get(Store.Status(store.status), "")
        return format_html('<span style="color:#a00">{}</span> — {}', store.status, hint)

    @admin.display(description="records")
    def records(self, store: Store) -> str:
        orders = reverse("admin:crm_order_changelist") + f"?ns_store_id={store.ns_store_id}"
        products = reverse("admin:crm_product_changelist") + f"?ns_store_id={store.ns_store_id}"
        return format_html('<a href="{}">orders</a> · <a href="{}">products</a>', orders, products)

    @admin.action(description="Resync (full sync of products, customers, orders)")
    def resync(self, request: HttpRequest, queryset: QuerySet[Store]) -> None:
        queued = 0
        for store in queryset:
            if store.syncing:
                services.full_resync_request(store=store, actor=user_actor(request))
                queued += 1
        self.message_user(request, f"{queued} full sync(s) queued.", messages.SUCCESS)


class RecordsAdmin(admin.ModelAdmin):
    """Read only: what the integration recorded, and the shop's records in the CRM."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(WebhookReceipt)
class WebhookReceiptAdmin(RecordsAdmin):
    list_display = ("received_at", "store", "event", "ns_resource_id", "processed_at", "outcome")
    list_filter = ("event", "outcome")
    readonly_fields = [f.name for f in WebhookReceipt._meta.fields]


@admin.register(IntegrationHealth)
class IntegrationHealthAdmin(RecordsAdmin):
    list_display = (
        "checked_at",
        "store",
        "ok",
        "status_code",
        "latency_ms",
        "consecutive_failures",
    )
    list_filter = ("ok",)
    readonly_fields = [f.name for f in IntegrationHealth._meta.fields]


@admin.register(SkippedRecord)
class SkippedRecordAdmin(RecordsAdmin):
    """Store records that could not be stored (the rest of their page was): fix them in the
    shop, then resync (or reprocess the webhook's dead letter); a stored record leaves the list."""

    list_display = ("last_failed_at", "store", "resource", "ns_id", "source", "failures", "error")
    list_filter = ("resource", "source")
    readonly_fields = [f.name for f in SkippedRecord._meta.fields]


class ShopOrderAdmin(RecordsAdmin):
    """The CRM's orders, shop ones first-class: filter by store, state; no identity columns."""

    list_display = (
        "number",
        "organization",
        "ns_store_id",
        "total_cents",
        "payment_status",
        "shipping_status",
        "paid_at",
        "updated_at",
    )
    list_filter = ("payment_status", "shipping_status", "ns_store_id")
    search_fields = ("number", "=ns_order_id")
    list_select_related = ("organization",)
    show_full_result_count = False
    exclude = ("customer_name", "customer_email", "customer_phone", "shipping_address")


class ShopProductAdmin(RecordsAdmin):
    list_display = (
        "name",
        "organization",
        "ns_store_id",
        "sku",
        "price_cents",
        "stock",
        "deleted_at",
    )
    list_filter = ("published", "ns_store_id")
    search_fields = ("name", "sku", "=ns_product_id")
    list_select_related = ("organization",)


# The CRM registers no admin for these yet; if it does one day, its own wins.
for model, model_admin in ((Order, ShopOrderAdmin), (Product, ShopProductAdmin)):
    if not admin.site.is_registered(model):
        admin.site.register(model, model_admin)
