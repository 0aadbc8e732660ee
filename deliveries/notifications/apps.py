from django.apps import AppConfig
from django.db.models.signals import post_migrate


class NotificationsConfig(AppConfig):
    name = "deliveries.notifications"
    label = "notifications"
    verbose_name = "Notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The relay's own relay.* types belong in the event-type catalogue.
        from deliveries.notifications.catalogue import register_after_migrate

        post_migrate.connect(register_after_migrate, sender=self)
