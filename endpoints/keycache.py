"""A short-lived in-process cache of live API keys.

Every API request authenticates; reading the key row each time was a quarter
of a publish's cost. A key read from the database is trusted for
API_KEY_CACHE_SECONDS (default 1), so a key revoked anywhere stops working in
every process within that time, and at once in the process that revoked it.
Only live keys are cached: a new key works at once and a wrong one is always
looked up. The cached ApiKey (with its merchant) is shared by the requests of
a process and must be treated as read-only.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from endpoints.models import ApiKey

MAX_ENTRIES = 10_000  # far more keys than one deployment uses; bounds memory


class KeyCache:
    """key hash -> (ApiKey, when it was read); safe under threads (one dict op each)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[ApiKey, datetime]] = {}

    def get(self, key_hash: str, *, now: datetime) -> ApiKey | None:
        entry = self._entries.get(key_hash)
        if entry is None:
            return None
        key, read_at = entry
        age = (now - read_at).total_seconds()
        # A clock that went backwards does not extend the trust either.
        if not 0 <= age < settings.API_KEY_CACHE_SECONDS:
            self._entries.pop(key_hash, None)
            return None
        return key

    def put(self, key_hash: str, key: ApiKey, *, now: datetime) -> None:
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key_hash] = (key, now)

    def forget(self, key_hash: str) -> None:
        self._entries.pop(key_hash, None)

    def clear(self) -> None:
        self._entries.clear()


live_keys = KeyCache()
