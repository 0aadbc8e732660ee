"""Where an endpoint's credentials may go (issue 42 review): over https only,
and only where the row, as it is when the change is written, lets them.

A client certificate or CA bundle needs an https URL always (over http it
would be silently unused); auth needs one unless
RELAY_ALLOW_PRIVATE_DESTINATIONS (development, where receivers on loopback
speak http), since plain http carries its password or token in clear.
endpoints/client_credentials.py checks a change against the endpoint as
read; credentials_row_errors checks it again against the locked row, so a
change made in between cannot slip past either check.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from endpoints.models import Endpoint

UNCHANGED = object()  # credentials_clean: a field the change does not give

TLS_NEEDS_HTTPS = (
    "A client certificate or CA bundle is used only over https: give the "
    "endpoint an https URL."
)
AUTH_NEEDS_HTTPS = (
    "Auth would send its password or token in clear over http: give the "
    "endpoint an https URL."
)
URL_NEEDS_HTTPS = (
    "This endpoint has {parts}, used only over https: give it an https URL, "
    "or remove {them} first."
)
# An endpoint's password or bearer token goes wherever its URL points.
MOVING_CREDENTIALS = (
    "Only an owner can change the URL of an endpoint that sends credentials "
    "(see its Authentication tab): they would go to the new address."
)
SECRET_CHANGED_MEANWHILE = (
    "The stored {secret} was changed by someone else while this change was "
    "made: give the {secret} again."
)
_ROW_FIELDS = (
    "auth_type",
    "auth_settings",
    "auth_secret",
    "tls_client_cert",
    "tls_ca_bundle",
)
_SECRET_FIELDS = {"basic": "password", "oauth2": "client_secret"}


def has_part(endpoint: Endpoint | None, name: str) -> bool:
    """Whether the endpoint has auth ("auth") or a certificate or CA bundle ("tls")."""
    if endpoint is None:
        return False
    if name == "auth":
        return bool(endpoint.auth_type)
    return bool(endpoint.tls_client_cert or endpoint.tls_ca_bundle)


def https_problems(
    url: str, *, url_changed: bool, auth: tuple[bool, bool], tls: tuple[bool, bool]
) -> list[tuple[str, str]]:
    """(field, message) for each part an http URL would carry; auth and tls
    are (set after the change, given in it). A part given is named; one kept
    names the URL, when the URL is what changed (a row stored before https
    was required stays editable in every other way)."""
    if urlsplit(url).scheme.lower() != "http":  # https, or a broker's own
        return []
    problems: list[tuple[str, str]] = []
    kept: list[str] = []
    if tls[0]:
        if tls[1]:
            problems.append(("tls", TLS_NEEDS_HTTPS))
        else:
            kept.append("a client certificate or CA bundle")
    if auth[0] and not settings.RELAY_ALLOW_PRIVATE_DESTINATIONS:
        if auth[1]:
            problems.append(("auth", AUTH_NEEDS_HTTPS))
        else:
            kept.append("auth (a password or token)")
    if kept and url_changed:
        them = "them" if len(kept) > 1 else "it"
        parts = " and ".join(kept)
        problems.append(("url", URL_NEEDS_HTTPS.format(parts=parts, them=them)))
    return problems


def credentials_row_errors(
    endpoint: Endpoint,
    *,
    url: str,
    auth: object,
    tls: object,
    changes: dict[str, object],
    url_changed: bool,
    may_move_credentials: bool,
) -> dict[str, list[str]]:
    """Lock the endpoint's row (call inside the change's transaction, before
    writing) and check the change against it rather than against endpoint as
    read: url is the URL after the change, auth and tls as given (UNCHANGED
    when not), changes the credentials columns checked for endpoint as read.

    Refused: a URL change by one who may not move credentials, stored since;
    an http URL meeting credentials stored since; a kept secret that was
    replaced since, or whose auth changed (it would go with settings it was
    not given for)."""
    row = (
        Endpoint.objects.select_for_update()
        .filter(merchant_id=endpoint.merchant_id, pk=endpoint.pk)  # one shard
        .only(*_ROW_FIELDS)
        .get()
    )
    errors: dict[str, list[str]] = {}
    if url_changed and not may_move_credentials and row.auth_type:
        errors["url"] = [MOVING_CREDENTIALS]
    has_auth = bool(auth) if auth is not UNCHANGED else has_part(row, "auth")
    has_tls = bool(tls) if tls is not UNCHANGED else has_part(row, "tls")
    for field, message in https_problems(
        url,
        url_changed=url_changed,
        auth=(has_auth, auth is not UNCHANGED),
        tls=(has_tls, tls is not UNCHANGED),
    ):
        errors.setdefault(field, []).append(message)
    # auth given without its secret: the stored one is kept (not written).
    secret_kept = "auth_type" in changes and "auth_secret" not in changes
    if secret_kept and (row.auth_type, row.auth_settings, row.auth_secret) != (
        endpoint.auth_type,
        endpoint.auth_settings,
        endpoint.auth_secret,
    ):
        name = _SECRET_FIELDS.get(endpoint.auth_type, "password")
        secret = name.replace("_", " ")
        errors.setdefault(f"auth.{name}", []).append(
            SECRET_CHANGED_MEANWHILE.format(secret=secret)
        )
    return errors
