from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from shop import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("relay/", include("relayproject.relay_urls")),
    # The project's own API: the relay's middleware leaves it alone.
    path("api/echo", views.echo),
]
