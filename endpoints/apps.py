from __future__ import annotations

from django.apps import AppConfig
from django.contrib.auth.signals import user_logged_in
from django.core import checks

from endpoints.checks import encryption_keys_check, signing_default_check
from relayproject.lib.appsettings import defaults_apply
from relayproject.lib.sessions import seen_on_login


class EndpointsConfig(AppConfig):
    name = "endpoints"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # In another Django project: the relay settings it does not set.
        defaults_apply()
        # Admin and portal sign-ins alike: the idle clock starts at sign-in.
        user_logged_in.connect(seen_on_login, dispatch_uid="relay_session_seen")
        checks.register(encryption_keys_check, checks.Tags.security)
        checks.register(signing_default_check)
