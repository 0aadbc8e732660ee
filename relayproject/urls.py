"""URL map of the standalone relay: its routes (relayproject/relay_urls.py) at
the root, with the staff admin and the error pages."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

# The console's lists need the full width at 1280 px more than a second menu:
# the index page lists every model.
admin.site.enable_nav_sidebar = False

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="portal:home"), name="root"),
    # Before the admin's own: admin/find/ is among them.
    path("", include("relayproject.relay_urls")),
    path("admin/", admin.site.urls),
]

handler400 = "relayproject.views.bad_request"
handler403 = "relayproject.views.permission_denied"
handler404 = "relayproject.views.page_not_found"
handler500 = "relayproject.views.server_error"
