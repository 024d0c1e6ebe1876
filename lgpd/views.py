"""The export download: whoever holds a valid signed link gets the file (no login: the link is
the credential, as for any e-mailed download). Every download is audited."""

from __future__ import annotations

from django.http import FileResponse, HttpRequest, HttpResponseBase, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from deskcomm import audit
from lgpd import exports
from lgpd.models import DataRequest


@require_GET
def export_download(request: HttpRequest, token: str) -> HttpResponseBase:
    try:
        data_request = exports.request_for_token(token)
    except exports.ExpiredLink as exc:
        return JsonResponse({"error": {"code": "link_expired", "message": str(exc)}}, status=410)
    except exports.InvalidLink as exc:
        return JsonResponse({"error": {"code": "not_found", "message": str(exc)}}, status=404)
    _audit_download(request, data_request)
    storage = exports.export_storage()
    if not exports.is_local(storage):
        return redirect(exports.presigned_url(data_request.export_name))
    return FileResponse(
        storage.open(data_request.export_name, "rb"),
        as_attachment=True,
        filename=f"lgpd-export-{data_request.pk}.json",
        content_type="application/json",
    )


def _audit_download(request: HttpRequest, data_request: DataRequest) -> None:
    audit.record(
        actor="signed-link",
        action="lgpd.export.download",
        target_type="lgpd.datarequest",
        target_id=data_request.pk,
        organization_id=data_request.organization_id,
        details={"contact_id": str(data_request.contact_id)},
    )
