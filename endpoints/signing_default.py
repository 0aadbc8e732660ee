"""The signing scheme a new endpoint takes when it names none: its merchant's
default (Merchant.signing), else the platform's (DEFAULT_SIGNING_SCHEME).

Read once, when the endpoint is created, and stored on it: changing either
default later changes no existing endpoint, so no receiver starts getting a
signature it cannot check without its endpoint being changed on purpose.
"""

from __future__ import annotations

from django.conf import settings

from endpoints import signing_keys

SETTING = "DEFAULT_SIGNING_SCHEME"
# Where the default comes from, in the words the portal shows.
FROM_MERCHANT = "your account's default"
FROM_PLATFORM = "the relay's default"


def scheme_for_new_endpoint(merchant) -> str:
    """The scheme an endpoint of `merchant` created without one signs with."""
    return merchant.signing or settings.DEFAULT_SIGNING_SCHEME


def default_source(merchant) -> str:
    """Where scheme_for_new_endpoint(merchant) comes from, for people."""
    return FROM_MERCHANT if merchant.signing else FROM_PLATFORM


def setting_problems(value: object) -> list[str]:
    """What is wrong with a DEFAULT_SIGNING_SCHEME value ([] when nothing)."""
    if value in signing_keys.SCHEMES:
        return []
    return [
        f"{SETTING} must be one of {', '.join(signing_keys.SCHEMES)}; not {value!r}."
    ]
