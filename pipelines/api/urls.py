"""Pipeline and order routes (included by deskcomm/api_urls.py). No trailing slashes."""

from __future__ import annotations

from django.urls import path

from pipelines.api import views

# Mounted at /api/v1/.
v1_urlpatterns = [
    path("pipelines", views.PipelinesView.as_view(), name="pipelines"),
    path("pipelines/<uuid:pipeline_id>", views.PipelineDetailView.as_view(), name="pipeline"),
    path(
        "pipelines/<uuid:pipeline_id>/executions",
        views.PipelineExecutionsView.as_view(),
        name="pipeline-executions",
    ),
    path("orders", views.OrdersView.as_view(), name="orders"),
]
# Seed 004's unversioned path, mounted at /api/.
seed_urlpatterns = [
    path(
        "pipelines/<uuid:pipeline_id>/executions",
        views.SeedPipelineExecutionsView.as_view(),
        name="seed-pipeline-executions",
    ),
]
