from django.apps import AppConfig


class DeliveriesConfig(AppConfig):
    name = "deliveries"
    default_auto_field = "django.db.models.BigAutoField"
