"""factory_boy factories for the core and CRM records.

Related records share one organization: a `ConversationFactory()` makes its contact in the
conversation's organization, a `MessageFactory()` its conversation in the message's. Override
any field as usual (`ContactFactory(organization=org, name="Maria")`); `ContactFactory(cpf=...)`
stores the CPF encrypted, like the model's `cpf` setter.
"""

from __future__ import annotations

from typing import Any

import factory
from factory.django import DjangoModelFactory

from core.models import Organization
from crm.models import Contact, Conversation, Lead, LeadActivity, Message, Order


class OrganizationFactory(DjangoModelFactory[Organization]):
    class Meta:
        model = Organization
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Organization {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class ContactFactory(DjangoModelFactory[Contact]):
    class Meta:
        model = Contact

    organization = factory.SubFactory(OrganizationFactory)
    name = factory.Sequence(lambda n: f"Contact {n}")
    phone = factory.Sequence(lambda n: f"+55 11 9{n:04d}-0000")
    email = factory.Sequence(lambda n: f"contact{n}@example.com")

    @classmethod
    def _create(cls, model_class: type[Contact], *args: Any, **kwargs: Any) -> Contact:
        cpf = kwargs.pop("cpf", "")
        contact = model_class(*args, **kwargs)
        contact.cpf = cpf
        contact.save()
        return contact


class ConversationFactory(DjangoModelFactory[Conversation]):
    class Meta:
        model = Conversation

    organization = factory.SubFactory(OrganizationFactory)
    contact = factory.SubFactory(
        ContactFactory, organization=factory.SelfAttribute("..organization")
    )
    external_chat_id = factory.Sequence(lambda n: f"55119{n:08d}@c.us")


class MessageFactory(DjangoModelFactory[Message]):
    class Meta:
        model = Message

    organization = factory.SubFactory(OrganizationFactory)
    conversation = factory.SubFactory(
        ConversationFactory, organization=factory.SelfAttribute("..organization")
    )
    direction = Message.Direction.INBOUND
    body = factory.Sequence(lambda n: f"message {n}")


class LeadFactory(DjangoModelFactory[Lead]):
    class Meta:
        model = Lead

    organization = factory.SubFactory(OrganizationFactory)
    contact = factory.SubFactory(
        ContactFactory, organization=factory.SelfAttribute("..organization")
    )
    name = factory.Sequence(lambda n: f"Lead {n}")


class LeadActivityFactory(DjangoModelFactory[LeadActivity]):
    class Meta:
        model = LeadActivity

    organization = factory.SubFactory(OrganizationFactory)
    lead = factory.SubFactory(LeadFactory, organization=factory.SelfAttribute("..organization"))
    note = factory.Sequence(lambda n: f"note {n}")


class OrderFactory(DjangoModelFactory[Order]):
    class Meta:
        model = Order

    organization = factory.SubFactory(OrganizationFactory)
    contact = factory.SubFactory(
        ContactFactory, organization=factory.SelfAttribute("..organization")
    )
    number = factory.Sequence(lambda n: f"{1000 + n}")
    total_cents = 15990
