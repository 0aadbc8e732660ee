"""The peer of issue 8's benchmark: django-webhook 0.0.15 at its defaults on Celery.

One model (orders.Order) whose creation fires one webhook per subscribed
Webhook row; PostgreSQL as for the relay; Redis as the broker, on a database
number and queue of its own (PEER_REDIS_URL, PEER_QUEUE) so that nothing else
on the shared Redis is touched.
"""

import os

SECRET_KEY = "peer-bench-" + "x" * 40
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_webhook",
    "orders",
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PEER_DB", "bench_peer"),
        "USER": "postgres",
        "HOST": "127.0.0.1",
        "PORT": 5432,
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DJANGO_WEBHOOK = {"MODELS": ["orders.Order"]}
CELERY_BROKER_URL = os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379/13")
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("PEER_QUEUE", "peer-bench")
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
