"""Login rate limiting: failures counted in Django's cache per username and IP.

With the default per-process cache each web process counts on its own; a
shared cache (CACHES) makes the limit global. Good enough against guessing
from one address, which is what it is for.
"""

from __future__ import annotations

import hashlib

from django.core.cache import cache

MAX_FAILURES = 5
WINDOW_SECONDS = 15 * 60


def _key(username: str, ip: str) -> str:
    digest = hashlib.sha256(f"{username.lower()}|{ip}".encode()).hexdigest()
    return f"portal-login-failures:{digest}"


def login_blocked(*, username: str, ip: str) -> bool:
    return cache.get(_key(username, ip), 0) >= MAX_FAILURES


def login_failed(*, username: str, ip: str) -> None:
    key = _key(username, ip)
    # add() starts the window on the first failure; incr() keeps its expiry.
    if not cache.add(key, 1, WINDOW_SECONDS):
        try:
            cache.incr(key)
        except ValueError:
            cache.add(key, 1, WINDOW_SECONDS)


def login_succeeded(*, username: str, ip: str) -> None:
    cache.delete(_key(username, ip))
