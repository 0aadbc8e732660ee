"""The relay's routes, for any prefix: the API, the merchant portal, health,
metrics, the admin's find box and the demo receiver.

relayproject/urls.py mounts them at the root; a Django project of its own
mounts them where it likes, `path("relay/", include("relayproject.relay_urls"))`,
and keeps its own admin site, where the relay's models are registered.
Every link the relay makes to these is reverse()d, so it follows the prefix.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from deliveries.ops.metrics import metrics_view
from relayproject import admin_find, demo, views
from relayproject.api import api

urlpatterns = [
    path("portal/", include("relayproject.portal.urls")),
    path(
        "admin/find/", admin.site.admin_view(admin_find.admin_find), name="admin_find"
    ),
    path("api/v1/", api.urls),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("demo/receiver/<str:endpoint_id>/", demo.receiver, name="demo-receiver"),
]
