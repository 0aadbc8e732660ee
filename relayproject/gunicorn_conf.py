"""gunicorn's settings: `webhook-relay web` passes them (`-c python:relayproject.gunicorn_conf`),
and gunicorn.conf.py at the top of the source tree imports them.

gunicorn sets a request's scheme from forwarded headers itself, believing the
peers in its forwarded_allow_ips, loopback by default: anything on the host
could claim https for a plain request. Here that list is TRUSTED_PROXIES, the
proxies the application believes (relayproject/lib/proxies.py), and the header is
the one the application reads, so both agree; empty believes nobody.
"""

from __future__ import annotations

import environ

from relayproject.lib.proxies import forwarded_allow_list

# What gunicorn reads from this module (and the top-level file imports).
__all__ = [
    "forwarded_allow_ips",
    "logger_class",
    "post_worker_init",
    "secure_scheme_headers",
]

forwarded_allow_ips = forwarded_allow_list(
    environ.Env().list("TRUSTED_PROXIES", default=[])
)
# gunicorn also believes X-Forwarded-Protocol and X-Forwarded-Ssl by default;
# the application only X-Forwarded-Proto.
secure_scheme_headers = {"X-FORWARDED-PROTO": "https"}
# Portal link tokens out of gunicorn's own access and error logs (the root
# log handler's filter never sees them): relayproject/lib/gunicorn_logging.py.
logger_class = "relayproject.lib.gunicorn_logging.ScrubbingLogger"


def post_worker_init(worker) -> None:
    """Once a worker has loaded the application: load the URL map too (Django
    imports the views on the first request otherwise), then settle the
    collector over everything the worker keeps (relayproject/lib/collector.py)."""
    from django.urls import get_resolver

    from relayproject.lib.collector import collector_settle

    get_resolver().url_patterns  # noqa: B018 - imports ROOT_URLCONF and its views
    collector_settle()
