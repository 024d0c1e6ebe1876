"""Export downloads. Every path that hands out the file audits it (`services.export_download_
record`): the e-mailed single-use link (here), the API (`lgpd.api`) and the admin (`lgpd.admin`).

The link answers a GET with a page holding a download button (a POST), so that a mail scanner
that fetches links ahead of the reader cannot use it up; the POST uses the link and streams the
file. A second use, a forged token or an export that is gone gets an error page.
"""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from core import rls
from lgpd import exports, selectors, services
from lgpd.models import DataRequest

LINK_TEMPLATE = "lgpd/export_link.html"


@never_cache
@require_http_methods(["GET", "POST"])
def export_download(request: HttpRequest, token: str) -> HttpResponseBase:
    rls.set_scope(bypass=True)  # no tenant yet: the token names the request
    if request.method == "GET":
        return _link_page(request, token)
    try:
        data_request = services.export_link_consume(token=token)
    except exports.InvalidLink as exc:
        return _link_error(request, str(exc), status=404)
    except exports.Unavailable as exc:
        return _link_error(request, str(exc), status=410)
    return serve_export(data_request, actor="export-link", channel=services.DownloadChannel.LINK)


def serve_export(data_request: DataRequest, *, actor: str, channel: str) -> HttpResponseBase:
    """The export file as an attachment (or a short presigned redirect on S3), audited."""
    services.export_download_record(request=data_request, actor=actor, channel=channel)
    storage = exports.export_storage()
    if not exports.is_local(storage):
        return redirect(exports.presigned_url(data_request.export_name))
    return FileResponse(
        storage.open(data_request.export_name, "rb"),
        as_attachment=True,
        filename=f"lgpd-export-{data_request.pk}.json",
        content_type="application/json",
    )


def _link_page(request: HttpRequest, token: str) -> HttpResponse:
    found = selectors.data_request_for_link(token)
    if found is None:
        return _link_error(request, "not a valid download link", status=404)
    if found.export_link_used_at is not None:
        return _link_error(request, "this download link was already used", status=410)
    try:
        exports.check_available(found)
    except exports.Unavailable as exc:
        return _link_error(request, str(exc), status=410)
    return render(request, LINK_TEMPLATE, {"expires_at": found.export_expires_at})


def _link_error(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    return render(request, LINK_TEMPLATE, {"error": message}, status=status)
