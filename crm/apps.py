"""The CRM app: the records the bus talks about (contact, conversation, message, consent, lead,
order), the lead trigger and `order_confirm` (its `order-post-worker` consumer lives in
pipelines.handlers: it runs the order.post pipeline)."""

from __future__ import annotations

from django.apps import AppConfig


class CrmConfig(AppConfig):
    name = "crm"
    verbose_name = "CRM records"

    def ready(self) -> None:
        from core import restore_scope
        from core.crypto import register_encrypted_field
        from crm import conversation_scopes  # noqa: F401  (conversations:*, analytics:read)
        from crm.api import (
            contact_scopes,  # noqa: F401  (declares contacts:read / contacts:write)
            scopes,  # noqa: F401  (leads:*, messages:send)
        )
        from crm.models import Contact

        register_encrypted_field(Contact.CPF_CONTEXT, "crm.Contact", "cpf_encrypted")
        restore_scope.count_after_restore(self.label)  # the CRM's records, checked after a restore
