"""Merchant portal routes. Every route with <slug> is fetched through memberships."""

from __future__ import annotations

from django.urls import path

from relayproject.portal.views import (
    auth,
    catalogue,
    credentials,
    deliveries,
    endpoints,
    health,
    link,
    listen,
    notifications,
    pause,
    recover,
    secrets,
    verification,
)

app_name = "portal"

M = "m/<slug:slug>/"
EP = M + "endpoints/<str:endpoint_id>/"
DLV = M + "deliveries/<str:delivery_id>/"

urlpatterns = [
    path("", auth.home, name="home"),
    path("login/", auth.login, name="login"),
    path("logout/", auth.logout, name="logout"),
    path("link/<str:token>/", link.link_open, name="link_open"),
    path(
        "link/<str:token>/confirm-address/",
        link.address_confirm,
        name="address_confirm",
    ),
    path("theme.css", link.theme_css, name="theme_css"),
    path(M, endpoints.endpoint_list, name="endpoint_list"),
    path(M + "endpoints/new/", endpoints.endpoint_create, name="endpoint_create"),
    path(
        M + "endpoints/new/test-receiver/",
        endpoints.endpoint_create_test,
        name="endpoint_create_test",
    ),
    path(EP, endpoints.endpoint_detail, name="endpoint_detail"),
    path(EP + "edit/", endpoints.endpoint_edit, name="endpoint_edit"),
    path(EP + "toggle/", endpoints.endpoint_toggle, name="endpoint_toggle"),
    path(EP + "delete/", endpoints.endpoint_delete, name="endpoint_delete"),
    path(EP + "reenable/", notifications.endpoint_reenable, name="endpoint_reenable"),
    path(EP + "try-now/", pause.endpoint_try_now, name="endpoint_try_now"),
    path(EP + "secret/reveal/", secrets.secret_reveal, name="secret_reveal"),
    path(EP + "secret/rotate/", secrets.secret_rotate, name="secret_rotate"),
    path(
        EP + "authentication/",
        credentials.endpoint_credentials,
        name="endpoint_credentials",
    ),
    path(
        EP + "verification/",
        verification.endpoint_verification,
        name="endpoint_verification",
    ),
    path(
        EP + "verification/retry/",
        verification.endpoint_verification_retry,
        name="endpoint_verification_retry",
    ),
    path(EP + "test/", deliveries.endpoint_test, name="endpoint_test"),
    path(
        EP + "deliveries/", deliveries.endpoint_deliveries, name="endpoint_deliveries"
    ),
    path(EP + "recover/", recover.endpoint_recover, name="endpoint_recover"),
    path(EP + "example/", catalogue.endpoint_example, name="endpoint_example"),
    path(M + "event-types/", catalogue.catalogue, name="catalogue"),
    path(EP + "health/", health.endpoint_health, name="endpoint_health"),
    path(EP + "end-session/", listen.listen_session_end, name="listen_session_end"),
    path(M + "listen/", listen.listen_sessions, name="listen_sessions"),
    path(M + "listen/start/", listen.listen_session_start, name="listen_session_start"),
    path(M + "deliveries/", deliveries.delivery_list, name="delivery_list"),
    path(
        M + "deliveries/replay/",
        deliveries.deliveries_bulk_replay,
        name="deliveries_bulk_replay",
    ),
    path(M + "notifications/", notifications.notifications, name="notifications"),
    path(
        M + "notifications/settings/",
        notifications.notification_settings_edit,
        name="notification_settings",
    ),
    path(DLV, deliveries.delivery_detail, name="delivery_detail"),
    path(DLV + "status.json", deliveries.delivery_status, name="delivery_status"),
    path(DLV + "body.json", deliveries.delivery_body, name="delivery_body"),
    path(DLV + "replay/", deliveries.delivery_replay, name="delivery_replay"),
    path(DLV + "retry-now/", deliveries.delivery_retry_now, name="delivery_retry_now"),
]
