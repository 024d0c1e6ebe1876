"""Top-level URL configuration."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponsePermanentRedirect
from django.urls import include, path, re_path

from core import admin_otp
from core.admin_scope import choose_organization_view
from core.metrics import metrics_view
from core.shown_once import shown_once_view
from deskcomm.landing import favicon, landing
from jobs.admin_views import job_queues_view
from jobs.views import cron_run
from nuvemshop.urls import install_urlpatterns as nuvemshop_install_urls

admin.site.site_header = "Deskcomm operations"
admin.site.site_title = "Deskcomm"
admin.site.index_title = "Event bus and CRM records"
admin.site.site_url = "/"  # "View site": the landing page (deskcomm/landing.py)

# The records were the `deskcomm` app's until the layering split: old admin links still work.
MOVED_FROM_DESKCOMM = ("core", "crm", "jobs")


def moved_admin_page(request: HttpRequest, model: str, rest: str) -> HttpResponsePermanentRedirect:
    """/admin/deskcomm/<model>/... -> the same page under the model's app today."""
    for label in MOVED_FROM_DESKCOMM:
        if model in apps.get_app_config(label).models:
            query = f"?{request.META['QUERY_STRING']}" if request.META.get("QUERY_STRING") else ""
            return HttpResponsePermanentRedirect(f"/admin/{label}/{model}/{rest}{query}")
    raise Http404(f"no admin page for {model}")


urlpatterns = [
    path("", landing, name="landing"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/ops/", include("eventbus.admin.urls")),  # before the admin's catch-all
    path("admin/nuvemshop/install/", include(nuvemshop_install_urls)),
    path("admin/jobs/queues/", admin.site.admin_view(job_queues_view), name="admin-job-queues"),
    path("admin/otp/enrol/", admin.site.admin_view(admin_otp.enrol_view), name="admin-otp-enrol"),
    path(
        "admin/otp/verify/", admin.site.admin_view(admin_otp.verify_view), name="admin-otp-verify"
    ),
    path(
        "admin/organization/",
        admin.site.admin_view(choose_organization_view),
        name="admin-organization",
    ),
    path(
        "admin/shown-once/<str:token>/",
        admin.site.admin_view(shown_once_view),
        name="admin-shown-once",
    ),
    re_path(r"^admin/deskcomm/(?P<model>[a-z]+)/(?P<rest>.*)$", moved_admin_page),
    path("admin/", admin.site.urls),
    path("api/v1/cron/<str:name>", cron_run, name="cron-run"),
    path("metrics", metrics_view, name="metrics"),
    path("lgpd/", include("lgpd.urls")),
    path("api/", include("deskcomm.api_urls")),
]

# Under /api/ these answer in the API's JSON error shape; elsewhere Django's pages.
handler400 = "core.api.errors.bad_request"
handler500 = "core.api.errors.server_error"
