"""URL map: REST API, staff admin, merchant portal, health and metrics."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from relayproject import demo, views
from relayproject.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("healthz", views.healthz, name="healthz"),
    path("demo/receiver/<str:endpoint_id>/", demo.receiver, name="demo-receiver"),
]
