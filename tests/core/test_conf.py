"""core.conf.AppSettings: typed knobs declared once, read from the settings dict at call time."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from core.conf import AppSettings
from eventbus.store.conf import bus_settings


class DemoSettings(AppSettings, namespace="DEMO"):
    RETRIES: int = 3
    RATE: float = 0.5
    ENABLED: bool = False
    NAME: str = "demo"
    SCHEDULE: tuple[float, ...] = (1, 2)
    LIMITS: Mapping[str, int] = {}


demo = DemoSettings()


def test_without_the_settings_dict_every_knob_is_its_declared_default() -> None:
    assert (demo.RETRIES, demo.RATE, demo.ENABLED, demo.NAME) == (3, 0.5, False, "demo")
    assert demo.SCHEDULE == (1.0, 2.0)
    assert demo.LIMITS == {}


def test_a_knob_missing_from_the_settings_dict_is_its_default(settings: Any) -> None:
    settings.DEMO = {"RATE": 0.9}
    assert demo.RETRIES == 3
    assert demo.RATE == 0.9


def test_overrides_through_the_settings_fixture_are_read_at_call_time(settings: Any) -> None:
    settings.DEMO = {"RETRIES": 5}
    assert demo.RETRIES == 5
    settings.DEMO = {"RETRIES": 7}
    assert demo.RETRIES == 7


def test_values_are_coerced_to_the_declared_type(settings: Any) -> None:
    settings.DEMO = {
        "RETRIES": "12",
        "RATE": 2,
        "ENABLED": "true",
        "SCHEDULE": [1, "2.5"],
        "LIMITS": {"a": "4"},
    }
    assert demo.RETRIES == 12 and isinstance(demo.RETRIES, int)
    assert demo.RATE == 2.0 and isinstance(demo.RATE, float)
    assert demo.ENABLED is True
    assert demo.SCHEDULE == (1.0, 2.5)
    assert demo.LIMITS == {"a": 4}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("RETRIES", "abc"),
        ("RETRIES", 2.5),
        ("RETRIES", True),
        ("RATE", "fast"),
        ("ENABLED", "maybe"),
        ("NAME", 42),
        ("SCHEDULE", "1,2"),
        ("SCHEDULE", [1, "x"]),
        ("LIMITS", {"a": "many"}),
        ("LIMITS", [("a", 1)]),
    ],
)
def test_a_bad_value_is_an_error_naming_the_setting(settings: Any, name: str, value: Any) -> None:
    settings.DEMO = {name: value}
    with pytest.raises(ImproperlyConfigured, match=rf"DEMO\['{name}'\] must be .*, not "):
        getattr(demo, name)


def test_an_unknown_name_is_an_attribute_error_naming_the_dict() -> None:
    with pytest.raises(AttributeError, match="unknown DEMO setting 'RETRYS'"):
        demo.RETRYS  # type: ignore[attr-defined]


def test_a_knob_of_an_unsupported_type_is_refused_when_declared() -> None:
    with pytest.raises(TypeError, match="cannot be"):

        class Broken(AppSettings, namespace="BROKEN"):
            WHEN: complex = 1j


def test_the_apps_conf_objects_read_their_dict(settings: Any) -> None:
    settings.EVENTBUS = {"MAX_ATTEMPTS": "2", "RETRY_SCHEDULE": [0.1]}
    assert bus_settings.MAX_ATTEMPTS == 2
    assert bus_settings.RETRY_SCHEDULE == (0.1,)
    assert bus_settings.LEASE_SECONDS == 30.0
