from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from relayproject.lib import citus
        from relayproject.lib.appsettings import defaults_apply
        from relayproject.lib.tracing import tracing_configure

        # In another Django project: the relay settings it does not set.
        defaults_apply()
        # Web and dispatcher processes alike: tracing is on only when the
        # OTEL_* environment asks for it (relayproject/lib/tracing.py).
        tracing_configure()
        connection_created.connect(citus.note_connection)
