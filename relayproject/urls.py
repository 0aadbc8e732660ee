"""URL map: REST API, staff admin, merchant portal, health and metrics."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from deliveries.ops.metrics import metrics_view
from relayproject import admin_find, demo, views
from relayproject.api import api

# The console's lists need the full width at 1280 px more than a second menu:
# the index page lists every model.
admin.site.enable_nav_sidebar = False

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="portal:home"), name="root"),
    path("portal/", include("relayproject.portal.urls")),
    path(
        "admin/find/", admin.site.admin_view(admin_find.admin_find), name="admin_find"
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("demo/receiver/<str:endpoint_id>/", demo.receiver, name="demo-receiver"),
]

handler400 = "relayproject.views.bad_request"
handler403 = "relayproject.views.permission_denied"
handler404 = "relayproject.views.page_not_found"
handler500 = "relayproject.views.server_error"
