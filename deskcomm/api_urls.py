"""Everything under /api/: OpenAPI schema and docs, the apps' endpoints, then a JSON 404.

Apps add their routes here (`v1/...` for versioned ones). The catch-all comes last so an unknown
/api/ path answers in the API's error shape instead of an HTML page or a slash redirect.
"""

from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.api import schema  # noqa: F401  (registers the OpenAPI auth extension)
from core.api.errors import api_not_found
from core.api.views import ping
from core.health.views import health_view
from crm.api.contact_urls import v1_urlpatterns as contact_urlpatterns
from crm.api.urls import v1_urlpatterns as crm_urlpatterns
from eventbus.api.urls import outbox_urlpatterns, v1_urlpatterns
from lgpd.urls import api_urlpatterns as lgpd_urlpatterns
from lgpd.urls import contact_urlpatterns as consent_urlpatterns
from nuvemshop.urls import webhook_urlpatterns as nuvemshop_webhook_urlpatterns
from pipelines.api.urls import seed_urlpatterns as pipeline_seed_urlpatterns
from pipelines.api.urls import v1_urlpatterns as pipeline_urlpatterns
from webhooks.api.urls import webhook_urlpatterns

urlpatterns = [
    path("ping", ping, name="api-ping"),
    # A plain Django view: no API key, no throttle (probes and load balancers call it).
    path("v1/health", health_view, name="api-health"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("v1/", include(v1_urlpatterns)),
    path("v1/webhooks/", include(webhook_urlpatterns)),
    path("v1/lgpd/", include(lgpd_urlpatterns)),
    path("v1/", include(pipeline_urlpatterns)),
    path("v1/", include("crm.api.conversation_urls")),
    path("v1/", include(contact_urlpatterns)),
    path("v1/", include(crm_urlpatterns)),
    path("v1/", include(consent_urlpatterns)),
    *outbox_urlpatterns,
    *pipeline_seed_urlpatterns,
    path("webhooks/nuvemshop/", include(nuvemshop_webhook_urlpatterns)),
    path("", include("whatsapp.urls")),  # POST /api/webhooks/waha/<session> (WAHA's webhooks)
    re_path(r"", api_not_found),
]
