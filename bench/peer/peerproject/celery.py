"""The Celery app django-webhook's fire_webhook task runs on."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "peerproject.settings")
app = Celery("peerproject")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["django_webhook"])
