"""Django loads an app's models from `<app>.models`: the bus's tables are defined in the store."""

from eventbus.store.models import *  # noqa: F403
