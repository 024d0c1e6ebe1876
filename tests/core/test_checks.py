"""System checks: PostgreSQL only; consumers must consume declared event types; emit limits."""

from __future__ import annotations

import pytest
from django.test.utils import override_settings

from core.checks import check_postgres_only
from eventbus.operations.checks import check_consumers, check_emit_limits
from eventbus.store.registry import make_consumer, registry


def test_postgres_is_accepted() -> None:
    assert check_postgres_only() == []


def test_other_engines_are_refused() -> None:
    databases = {"default": {"ENGINE": "django.db.backends.mysql", "NAME": "x"}}
    with (
        pytest.warns(UserWarning, match="Overriding setting DATABASES"),
        override_settings(DATABASES=databases),
    ):
        errors = check_postgres_only()
    assert [e.id for e in errors] == ["deskcomm.E001"]
    assert "PostgreSQL only" in errors[0].msg


def test_consumer_of_an_undeclared_event_type_is_reported() -> None:
    assert check_consumers() == []
    with registry.temporarily(make_consumer("typo-worker", lambda e: None, events=["lead.creatd"])):
        errors = check_consumers()
    assert [e.id for e in errors] == ["eventbus.E001"]
    assert "lead.creatd" in errors[0].msg


@pytest.mark.parametrize(
    ("depth", "errors"), [(32, []), (0, ["eventbus.E002"]), (900, ["eventbus.E002"])]
)
def test_a_json_depth_limit_emit_cannot_enforce_is_reported(depth: int, errors: list[str]) -> None:
    with override_settings(EVENTBUS={"MAX_JSON_DEPTH": depth}):
        assert [e.id for e in check_emit_limits()] == errors


def test_a_json_depth_limit_that_is_not_an_integer_is_reported() -> None:
    with override_settings(EVENTBUS={"MAX_JSON_DEPTH": "deep"}):
        (error,) = check_emit_limits()
    assert error.id == "eventbus.E002" and "MAX_JSON_DEPTH" in error.msg


def test_s3_archive_without_boto3_is_reported() -> None:
    from importlib.util import find_spec

    from core.checks import check_archive_storage

    assert check_archive_storage() == []
    with override_settings(ARCHIVE_S3_BUCKET="archive-bucket"):
        errors = check_archive_storage()
    expected = [] if find_spec("boto3") else ["deskcomm.E007"]
    assert [e.id for e in errors] == expected


def test_private_outbound_targets_are_flagged_for_deploys(settings: object) -> None:
    from core.checks import check_outbound_http

    settings.DEBUG = False  # type: ignore[attr-defined]
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False  # type: ignore[attr-defined]
    assert check_outbound_http() == []
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True  # type: ignore[attr-defined]
    assert [w.id for w in check_outbound_http()] == ["deskcomm.W002"]
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False  # type: ignore[attr-defined]
    settings.WEBHOOKS = {**settings.WEBHOOKS, "ALLOW_PRIVATE_TARGETS": True}  # type: ignore[attr-defined]
    (warning,) = check_outbound_http()
    assert warning.id == "deskcomm.W002" and "WEBHOOKS_ALLOW_PRIVATE_TARGETS" in warning.msg
    settings.DEBUG = True  # type: ignore[attr-defined]
    assert check_outbound_http() == []


def test_drain_events_runs_every_check_but_the_webs() -> None:
    """A check without a tag would silently be left out of the worker's (core.checks)."""
    from django.core.checks import Tags
    from django.core.checks.registry import registry as checks

    from core.checks import WEB_ONLY_TAGS, worker_check_tags

    worker_tags = set(worker_check_tags())
    assert worker_tags.isdisjoint(WEB_ONLY_TAGS)
    assert {"deskcomm", Tags.models, Tags.database} <= worker_tags
    left_out = [
        f"{check.__module__}.{check.__name__}"
        for check in checks.get_checks(include_deployment_checks=True)
        if worker_tags.isdisjoint(check.tags) and WEB_ONLY_TAGS.isdisjoint(check.tags)
    ]
    # Untagged, and the web's too: the middleware (Django's, django-axes's settings for the
    # admin login), and the API schema (a deploy check)
    assert sorted(left_out) == [
        "axes.checks.axes_conf_check",
        "django.contrib.auth.checks.check_middleware",
        "drf_spectacular.checks.schema_check",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_web_process_whose_platform_alias_cannot_bypass_is_an_error(
    django_db_blocker: object, settings: object
) -> None:
    """deskcomm.E040: the platform alias connects as the web role: its bypass shows nothing."""
    from core.checks import check_database_roles
    from core.db_roles import PLATFORM_ALIAS, WEB
    from tests.support.roles import web_process

    settings.DATABASE_ROLE = WEB  # type: ignore[attr-defined]
    with web_process(django_db_blocker, platform=WEB):
        ids = [m.id for m in check_database_roles(databases=["default", PLATFORM_ALIAS])]
    assert ids == ["deskcomm.E040"]


@pytest.mark.django_db(transaction=True)
def test_the_web_roles_split_setup_passes_and_a_single_role_web_is_warned(
    django_db_blocker: object, settings: object
) -> None:
    """No message with the roles of core.db_roles; deskcomm.W040 when the web process's own
    role may bypass (a single DATABASE_URL: the owner's)."""
    from core.checks import check_database_roles
    from core.db_roles import PLATFORM_ALIAS, WEB
    from tests.support.db import as_web_process
    from tests.support.roles import web_process

    settings.DATABASE_ROLE = WEB  # type: ignore[attr-defined]
    with web_process(django_db_blocker):
        assert check_database_roles(databases=["default", PLATFORM_ALIAS]) == []
    with as_web_process():
        assert [m.id for m in check_database_roles(databases=["default"])] == ["deskcomm.W040"]


PRODUCTION_KEY = "a-production-secret-key-" * 3  # long enough, not the development one


def test_container_local_file_roots_are_production_errors_naming_the_setting(
    settings: object,
) -> None:
    """deskcomm.E008: relative, inside the code directory or the temporary directory."""
    import tempfile

    from core.checks import check_file_roots

    def filesystem(root: str) -> dict[str, object]:
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": root, "base_url": None},
        }

    storages = settings.STORAGES  # type: ignore[attr-defined]
    settings.DEBUG = False  # type: ignore[attr-defined]
    settings.SECRET_KEY = PRODUCTION_KEY  # type: ignore[attr-defined]
    settings.MEDIA_ROOT = "/data/media"  # type: ignore[attr-defined]
    settings.READ_ONLY_BUFFER_ROOT = "/data/read-only-buffer"  # type: ignore[attr-defined]
    settings.STORAGES = {  # type: ignore[attr-defined]
        **storages,
        "archive": filesystem("/data/archive"),
        "backups": filesystem("/srv/deskcomm/backups"),
        "lgpd_exports": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {}},
    }
    assert check_file_roots() == []
    settings.MEDIA_ROOT = "var/media"  # type: ignore[attr-defined]
    settings.STORAGES = {  # type: ignore[attr-defined]
        **settings.STORAGES,  # type: ignore[attr-defined]
        "archive": filesystem(str(settings.BASE_DIR / "var" / "archive")),  # type: ignore[attr-defined]
        "backups": filesystem(f"{tempfile.gettempdir()}/backups"),
    }
    errors = check_file_roots()
    assert {e.id for e in errors} == {"deskcomm.E008"}
    assert [e.msg.split(" is ")[0] for e in errors] == ["MEDIA_ROOT", "ARCHIVE_ROOT", "BACKUP_ROOT"]
    assert "relative" in errors[0].msg and "code directory" in errors[1].msg
    assert "temporary directory" in errors[2].msg
    settings.DEBUG = True  # type: ignore[attr-defined]
    assert check_file_roots() == []


@pytest.mark.django_db
def test_a_superuser_connection_is_an_error_in_production_unless_allowed(
    settings: object, django_db_blocker: object
) -> None:
    """deskcomm.E009 (production) / W003 (development, or DATABASE_ALLOW_SUPERUSER for a
    managed database): row-level security does not apply to a superuser."""
    from django.db import connections

    from core.checks import check_not_superuser
    from dev.pg_roles import PG_SUPERUSER

    alias = "as_superuser"
    connections.settings[alias] = {
        **connections["default"].settings_dict,
        "USER": PG_SUPERUSER,
        "PASSWORD": "",
    }
    try:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            assert check_not_superuser(databases=["default"]) == []  # the owner: not a superuser
            settings.DEBUG = True  # type: ignore[attr-defined]
            assert [m.id for m in check_not_superuser(databases=[alias])] == ["deskcomm.W003"]
            settings.DEBUG = False  # type: ignore[attr-defined]
            settings.SECRET_KEY = PRODUCTION_KEY  # type: ignore[attr-defined]
            (error,) = check_not_superuser(databases=[alias])
            assert error.id == "deskcomm.E009" and error.is_serious()
            assert "DATABASE_ALLOW_SUPERUSER" in (error.hint or "")
            settings.DATABASE_ALLOW_SUPERUSER = True  # type: ignore[attr-defined]
            assert [m.id for m in check_not_superuser(databases=[alias])] == ["deskcomm.W003"]
    finally:
        connections[alias].close()
        del connections.settings[alias]


@pytest.mark.parametrize(
    ("dpo", "problem"),
    [("", "is empty"), ("   ", "is empty"), ("dpo-at-example.com", "is not an e-mail address")],
)
def test_production_without_a_dpo_address_is_an_error(
    settings: object, dpo: str, problem: str
) -> None:
    """deskcomm.E011: the LGPD mails go to LGPD_DPO_EMAIL alone (not ADMINS): empty, the SLA
    warnings and dead LGPD work reach only the logs."""
    from core.checks import check_dpo_address

    settings.DEBUG = False  # type: ignore[attr-defined]
    settings.SECRET_KEY = PRODUCTION_KEY  # type: ignore[attr-defined]
    settings.ADMINS = [("ops@example.com", "ops@example.com")]  # type: ignore[attr-defined]
    settings.LGPD = {"DPO_EMAIL": dpo}  # type: ignore[attr-defined]
    (error,) = check_dpo_address()
    assert error.id == "deskcomm.E011" and error.is_serious()
    assert f"LGPD_DPO_EMAIL {problem}" in error.msg
    settings.LGPD = {}  # type: ignore[attr-defined]  # unset: lgpd.conf's default, ""
    assert [m.id for m in check_dpo_address()] == ["deskcomm.E011"]
    settings.LGPD = {"DPO_EMAIL": "dpo@example.com"}  # type: ignore[attr-defined]
    assert check_dpo_address() == []
    settings.LGPD = {"DPO_EMAIL": ""}  # type: ignore[attr-defined]
    settings.DEBUG = True  # type: ignore[attr-defined]
    assert check_dpo_address() == []  # development: no DPO needed


def test_production_with_the_admin_second_factor_off_is_an_error(settings: object) -> None:
    """deskcomm.E012: no TOTP for staff in production, unless ADMIN_OTP_ALLOW_DISABLED."""
    from core.checks import check_admin_second_factor

    settings.DEBUG = False  # type: ignore[attr-defined]
    settings.SECRET_KEY = PRODUCTION_KEY  # type: ignore[attr-defined]
    settings.ADMIN_OTP_REQUIRED = False  # type: ignore[attr-defined]
    settings.ADMIN_OTP_ALLOW_DISABLED = False  # type: ignore[attr-defined]
    (error,) = check_admin_second_factor()
    assert error.id == "deskcomm.E012" and error.is_serious()
    settings.ADMIN_OTP_ALLOW_DISABLED = True  # type: ignore[attr-defined]
    assert check_admin_second_factor() == []
    settings.ADMIN_OTP_ALLOW_DISABLED = False  # type: ignore[attr-defined]
    settings.ADMIN_OTP_REQUIRED = True  # type: ignore[attr-defined]
    assert check_admin_second_factor() == []
