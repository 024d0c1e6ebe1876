"""URLs of the console pages outside the model admins (mounted at /admin/ops/)."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path, re_path

from eventbus.admin import control, views

app_name = "eventbus_ops"

urlpatterns = [
    path("status/", admin.site.admin_view(views.status_view), name="status"),
    path(
        "status/charts.json",
        admin.site.admin_view(views.status_charts_view),
        name="status-charts",
    ),
    path("correlation/", admin.site.admin_view(views.correlation_view), name="correlation"),
    path("workers/", admin.site.admin_view(control.workers_view), name="workers"),
    re_path(
        r"^workers/(?P<worker_id>[^/]+)/(?P<action>quiet|stop)/$",
        admin.site.admin_view(control.worker_action_view),
        name="worker-action",
    ),
    path("consumers/", admin.site.admin_view(control.consumers_view), name="consumers"),
    re_path(
        r"^consumers/(?P<consumer>[^/]+)/(?P<action>pause|resume)/$",
        admin.site.admin_view(control.consumer_action_view),
        name="consumer-action",
    ),
    re_path(
        r"^consumers/(?P<consumer>[^/]+)/replay/$",
        admin.site.admin_view(control.consumer_replay_view),
        name="consumer-replay",
    ),
]
