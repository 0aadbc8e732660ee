"""The host's settings: Django's defaults, its own app, and what the relay
asks of a project it joins (docs/pages/install/django-project.md)."""

from __future__ import annotations

import os

SECRET_KEY = os.environ["SECRET_KEY"]
DEBUG = False
ALLOWED_HOSTS = ["testserver", "127.0.0.1"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "shop",
    # webhook-relay: the API's docs pages, the templates, the three apps.
    "ninja",
    "relayproject",
    "endpoints",
    "deliveries",
    "deliveries.notifications",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # The relay's API errors as problem+json, its body limits: on the relay's
    # api/ path alone, whatever the prefix.
    "relayproject.lib.problems.ApiProblemMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hostsite.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "relayproject.portal.branding.branding",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["HOST_DB_NAME"],
        "USER": os.environ["HOST_DB_USER"],
        "PASSWORD": os.environ.get("HOST_DB_PASSWORD", ""),
        "HOST": os.environ["HOST_DB_HOST"],
        "PORT": os.environ["HOST_DB_PORT"],
    }
}
AUTH_USER_MODEL = "shop.User"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"

# The relay settings this project sets; every other one keeps its default.
RELAY_ENCRYPTION_KEYS = [os.environ["RELAY_ENCRYPTION_KEY"]]
RELAY_BASE_URL = "https://shop.example"
RELAY_ALLOW_PRIVATE_DESTINATIONS = True  # its receiver listens on 127.0.0.1
PORTAL_PRODUCT_NAME = "Shop webhooks"
