"""The admin's second factor: TOTP (django-otp) for every staff user when ADMIN_OTP_REQUIRED.

After the password (the admin's own login form, throttled and locked out by django-axes), a
staff user whose session is not OTP-verified is sent to:

- /admin/otp/enrol/ when they have no confirmed TOTP device: the page shows a new device's
  otpauth:// URI, its secret and a QR code of it; a valid code from the authenticator app
  confirms the device and verifies the session;
- /admin/otp/verify/ otherwise: a 6-digit code from their device (django-otp throttles
  failures per device, doubling the wait after each one).

`manage.py admin_recover USERNAME` removes a user's devices and unlocks their lockouts (a lost
phone): they enrol again at their next login.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import urlencode

import qrcode
import qrcode.image.svg
from django import forms
from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django_otp import login as otp_login
from django_otp import match_token
from django_otp.plugins.otp_totp.models import TOTPDevice

ENROL_PATH = "/admin/otp/enrol/"
VERIFY_PATH = "/admin/otp/verify/"
# What an unverified staff user may still open: the two steps and the way out.
OPEN_PATHS = (ENROL_PATH, VERIFY_PATH, "/admin/logout/", "/admin/login/", "/admin/jsi18n/")
DEVICE_NAME = "admin"


def required() -> bool:
    return bool(getattr(settings, "ADMIN_OTP_REQUIRED", True))


def confirmed_device(user: Any) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=True).first()


class AdminOTPMiddleware:
    """Sends a staff user whose session has no verified second factor to enrol or verify.
    After django_otp's OTPMiddleware (which sets `request.user.is_verified`)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        path = request.path
        if (
            required()
            and path.startswith("/admin/")
            and getattr(user, "is_staff", False)
            and not user.is_verified()  # type: ignore[union-attr]
            and not path.startswith(OPEN_PATHS)
            and not path.startswith(settings.STATIC_URL or "/static/")
        ):
            target = VERIFY_PATH if confirmed_device(user) else ENROL_PATH
            return HttpResponseRedirect(f"{target}?{urlencode({'next': request.get_full_path()})}")
        return self.get_response(request)


class TokenForm(forms.Form):
    token = forms.RegexField(
        regex=r"^\d{6,8}$",
        label="Code from your authenticator app",
        error_messages={"invalid": "Enter the 6-digit code."},
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "inputmode": "numeric"}),
    )


def _next(request: HttpRequest) -> str:
    wanted = request.POST.get("next") or request.GET.get("next") or ""
    safe = url_has_allowed_host_and_scheme(wanted, {request.get_host()}, request.is_secure())
    return wanted if safe and wanted.startswith("/admin/") else reverse("admin:index")


def _page(request: HttpRequest, title: str, **context: Any) -> TemplateResponse:
    context = {
        **admin.site.each_context(request),
        "title": title,
        "next": _next(request),
        **context,
    }
    return TemplateResponse(request, "admin/core/otp.html", context)


def verify_view(request: HttpRequest) -> HttpResponse:
    """The second step of the login: a code from the user's confirmed device."""
    user: Any = request.user
    if user.is_verified():
        return HttpResponseRedirect(_next(request))
    if confirmed_device(user) is None:
        return HttpResponseRedirect(ENROL_PATH)
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        device = match_token(user, form.cleaned_data["token"])
        if device is not None:
            otp_login(request, device)
            return HttpResponseRedirect(_next(request))
        form.add_error("token", "That code is not valid (or it was used already); try the next.")
    return _page(request, "Two-factor verification", form=form, enrol=False)


def enrol_view(request: HttpRequest) -> HttpResponse:
    """Enrolment: a new TOTP device for the user, shown as an otpauth:// URI, its secret and a
    QR code; confirmed by a valid code from it. A user with a confirmed device verifies instead."""
    user: Any = request.user
    if confirmed_device(user) is not None:
        return HttpResponseRedirect(VERIFY_PATH)
    device = TOTPDevice.objects.filter(user=user, confirmed=False).first()
    if device is None:
        device = TOTPDevice.objects.create(user=user, name=DEVICE_NAME, confirmed=False)
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        if device.verify_token(form.cleaned_data["token"]):
            device.confirmed = True
            device.save(update_fields=["confirmed"])
            otp_login(request, device)
            return HttpResponseRedirect(_next(request))
        form.add_error("token", "That code is not valid; check the device's clock and try again.")
    uri = device.config_url
    return _page(
        request,
        "Set up two-factor authentication",
        form=form,
        enrol=True,
        uri=uri,
        secret=secret_of(device),
        qr=mark_safe(qr_svg(uri)),  # noqa: S308  (our own SVG of our own URI)
    )


def secret_of(device: TOTPDevice) -> str:
    """The device's key as authenticator apps take it typed in (base32, no padding)."""
    return base64.b32encode(device.bin_key).decode().rstrip("=")


def qr_svg(data: str) -> str:
    image = qrcode.make(data, image_factory=qrcode.image.svg.SvgPathImage, box_size=8)
    return image.to_string(encoding="unicode")
