"""An endpoint's auth and client certificate as the faces set and show them
(CONTRACT section 9; issue 42 items 1 and 2). HTTP endpoints only.

`auth` is `{"type": "basic", "username", "password"}` or `{"type": "oauth2",
"token_url", "client_id", "client_secret", "scope"?, "audience"?}`; `tls` is
`{"client_cert", "client_key", "ca_bundle"?}`, `{"pkcs12", "password"?,
"ca_bundle"?}` or `{"ca_bundle"}` alone. None or {} removes either.

Write-only secrets are re-sendable without being shown: a change that leaves
out `password` (basic) keeps the stored one while the type stays basic; one
that leaves out `client_secret` (oauth2) keeps the stored one while the type
stays oauth2 and the token URL stays the same, so a stored secret is never
sent somewhere new without being given again. `tls` has no such rule: it is
replaced whole (a key is never kept for a certificate it was not given with).

Credentials go over https only: a client certificate or CA bundle always
(over http they would be silently unused), auth unless
RELAY_ALLOW_PRIVATE_DESTINATIONS (development, where receivers on loopback
speak http), since plain http carries the password or token in clear.

Every check runs before anything is set, and every problem is listed at
once. No message repeats a value: most of them are secrets.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timedelta

from django.conf import settings

from endpoints import brokers, client_certificates
from endpoints.broker_fields import http_url_errors
from endpoints.credentials_guard import UNCHANGED, has_part, https_problems
from endpoints.custom_headers import normalised
from endpoints.models import Endpoint

BASIC = "basic"
OAUTH2 = "oauth2"
AUTH_TYPES = (BASIC, OAUTH2)
_AUTH_FIELDS = {
    BASIC: ("type", "username", "password"),
    OAUTH2: ("type", "token_url", "client_id", "client_secret", "scope", "audience"),
}
_TLS_FIELDS = ("client_cert", "client_key", "ca_bundle", "pkcs12", "password")
_AUTH_COLUMNS = ("auth_type", "auth_settings", "auth_secret")
_TLS_COLUMNS = (
    "tls_client_cert",
    "tls_client_key",
    "tls_ca_bundle",
    "tls_subject",
    "tls_not_after",
    "tls_expiry_warned_for",
)
USERNAME_MAX = 200
PASSWORD_MAX = 1000
TOKEN_URL_MAX = 2000
CLIENT_ID_MAX = 500
CLIENT_SECRET_MAX = 2000
SCOPE_MAX = 1000
AUDIENCE_MAX = 1000
# RFC 6749 appendix A: client_id is VSCHAR (%x20-7E); a scope is tokens of
# NQCHAR (%x21 / %x23-5B / %x5D-7E) separated by single spaces.
_VSCHAR_RE = re.compile(r"[\x20-\x7e]+")
_SCOPE_RE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+(?: [\x21\x23-\x5b\x5d-\x7e]+)*")
_VISIBLE_RE = re.compile(r"[\x21-\x7e]+")

ONLY_HTTP = "Only an HTTP endpoint takes auth and tls; a broker endpoint takes null."
AUTHORIZATION_TAKEN = (
    "The custom header Authorization cannot be set with auth: auth sends its "
    "own Authorization header. Remove one of them."
)

Loc = tuple[str, ...]


class CredentialsInvalid(ValueError):
    """auth or tls refused; .errors lists (loc inside the object, message)."""

    def __init__(self, errors: list[tuple[Loc, str]]) -> None:
        self.errors = errors
        super().__init__(
            "; ".join(
                f"{'.'.join(loc) or 'value'}: {message}" for loc, message in errors
            )
        )


def auth_set(endpoint: Endpoint, value: dict | None) -> None:
    """Check value and set the endpoint's auth on the instance (not saved)."""
    credentials_apply(endpoint, auth_changes(endpoint, value))


def tls_set(endpoint: Endpoint, value: dict | None) -> None:
    """Check value and set the endpoint's client certificate or CA bundle on
    the instance (not saved); subject and expiry come from the leaf."""
    credentials_apply(endpoint, tls_changes(endpoint, value))


def auth_changes(endpoint: Endpoint | None, value: object) -> dict[str, object]:
    """The auth columns value gives (CredentialsInvalid if it cannot be saved);
    endpoint is the one changed (its stored secret may be kept), None when new."""
    if value and endpoint is not None and endpoint.kind != brokers.HTTP:
        raise CredentialsInvalid([((), ONLY_HTTP)])
    return _auth_columns(value, current=endpoint)


def tls_changes(endpoint: Endpoint | None, value: object) -> dict[str, object]:
    """The tls columns value gives (CredentialsInvalid if it cannot be saved)."""
    if value and endpoint is not None and endpoint.kind != brokers.HTTP:
        raise CredentialsInvalid([((), ONLY_HTTP)])
    return _tls_columns(value)


def credentials_apply(endpoint: Endpoint, changes: dict[str, object]) -> list[str]:
    """Set checked columns on the instance; the fields to save ([] if none)."""
    if not changes:
        return []
    for name, column_value in changes.items():
        setattr(endpoint, name, column_value)
    endpoint.credentials_changed()
    return [*changes, "credentials_version"]


def credentials_clean(
    *,
    endpoint: Endpoint | None,
    kind: str,
    headers: object,
    auth: object = UNCHANGED,
    tls: object = UNCHANGED,
    url: str | None = None,
) -> tuple[dict[str, object], dict[str, list[str]]]:
    """For the services: (the columns a create or change writes, its errors
    keyed as the API nests them, "auth.token_url"). kind, headers and url are
    the endpoint's after the change (url None: the endpoint's own); auth or
    tls UNCHANGED when not given."""
    errors: dict[str, list[str]] = {}
    changes: dict[str, object] = {}
    for name, value, check in (
        ("auth", auth, _auth_columns),
        ("tls", tls, lambda v, current: _tls_columns(v)),
    ):
        if value is UNCHANGED:
            if kind != brokers.HTTP and has_part(endpoint, name):
                errors[name] = [
                    f'A broker endpoint takes no {name}: send "{name}": null '
                    "to remove it with the change of kind."
                ]
            continue
        if value and kind != brokers.HTTP:
            errors[name] = [ONLY_HTTP]
            continue
        try:
            changes |= check(value, current=endpoint)
        except CredentialsInvalid as exc:
            for loc, message in exc.errors:
                errors.setdefault(".".join((name, *loc)), []).append(message)
    has_auth = bool(auth) if auth is not UNCHANGED else has_part(endpoint, "auth")
    if has_auth and isinstance(headers, dict):
        if any(normalised(str(h)) == "authorization" for h in headers):
            errors.setdefault(
                "auth" if auth is not UNCHANGED else "headers", []
            ).append(AUTHORIZATION_TAKEN)
    has_tls = bool(tls) if tls is not UNCHANGED else has_part(endpoint, "tls")
    before = endpoint.url if endpoint is not None else None
    for field, message in https_problems(
        url if url is not None else before or "",
        url_changed=url is not None and url != before,
        auth=(has_auth, auth is not UNCHANGED),
        tls=(has_tls, tls is not UNCHANGED),
    ):
        # A part refused already needs no more words until it is right.
        if not any(key == field or key.startswith(f"{field}.") for key in errors):
            errors[field] = [message]
    return changes, errors


def auth_shown(endpoint: Endpoint) -> dict | None:
    """The endpoint's auth as answers show it: everything but the secret."""
    if endpoint.auth_type not in AUTH_TYPES:
        return None
    given = endpoint.auth_settings or {}
    if endpoint.auth_type == BASIC:
        return {"type": BASIC, "username": given.get("username", "")}
    return {
        "type": OAUTH2,
        "token_url": given.get("token_url", ""),
        "client_id": given.get("client_id", ""),
        "scope": given.get("scope"),
        "audience": given.get("audience"),
    }


def tls_shown(endpoint: Endpoint, *, now: datetime) -> dict | None:
    """The client certificate's subject and expiry and whether a CA bundle is
    set; expires_soon within CLIENT_CERT_EXPIRY_WARNING_DAYS, expired once past."""
    if not endpoint.tls_client_cert and not endpoint.tls_ca_bundle:
        return None
    not_after = endpoint.tls_not_after if endpoint.tls_client_cert else None
    expired = not_after is not None and not_after <= now
    window = timedelta(days=settings.CLIENT_CERT_EXPIRY_WARNING_DAYS)
    return {
        "subject": (endpoint.tls_subject or None) if endpoint.tls_client_cert else None,
        "not_after": not_after,
        "ca_bundle": bool(endpoint.tls_ca_bundle),
        "expires_soon": not_after is not None
        and not expired
        and not_after - now <= window,
        "expired": expired,
    }


def _auth_columns(value: object, *, current: Endpoint | None) -> dict[str, object]:
    if not value:
        return {"auth_type": "", "auth_settings": {}, "auth_secret": None}
    if not isinstance(value, dict):
        raise CredentialsInvalid([((), 'An object with "type", or null.')])
    auth_type = value.get("type")
    if auth_type not in AUTH_TYPES:
        raise CredentialsInvalid([(("type",), 'Choose "basic" or "oauth2".')])
    problems: list[tuple[Loc, str]] = [
        ((str(name)[:64],), f"Not a field of {auth_type} auth.")
        for name in value
        if name not in _AUTH_FIELDS[auth_type]
    ]
    same_type = current is not None and current.auth_type == auth_type
    if auth_type == BASIC:
        shown, secret_name = _basic_settings(value, problems), "password"
        secret_max = PASSWORD_MAX
        moved = False
    else:
        shown, secret_name = _oauth2_settings(value, problems), "client_secret"
        secret_max = CLIENT_SECRET_MAX
        moved = same_type and (current.auth_settings or {}).get(
            "token_url"
        ) != value.get("token_url")
    secret = value.get(secret_name)
    kept = False
    if secret is None:
        if same_type and not moved and current.auth_secret:
            kept = True
        elif moved:
            problems.append(
                (
                    (secret_name,),
                    "Give the client secret again: a stored one is kept only "
                    "while the token URL stays the same.",
                )
            )
        else:
            problems.append(((secret_name,), "Required."))
    elif problem := _text_problem(secret, secret_max, pattern=None):
        problems.append(((secret_name,), problem))
    if problems:
        raise CredentialsInvalid(problems)
    if kept:
        # Not written back as read: a rotation since would be undone.
        return {"auth_type": auth_type, "auth_settings": shown}
    return {"auth_type": auth_type, "auth_settings": shown, "auth_secret": secret}


def _basic_settings(value: dict, problems: list) -> dict[str, str]:
    username = value.get("username")
    if problem := _text_problem(username, USERNAME_MAX, pattern=None):
        problems.append((("username",), problem))
    elif ":" in username:
        # RFC 7617: the first colon ends the user-id.
        problems.append((("username",), 'A Basic auth username may not contain ":".'))
    return {"username": username}


def _oauth2_settings(value: dict, problems: list) -> dict[str, str]:
    shown: dict[str, str] = {}
    token_url = value.get("token_url")
    if problem := _text_problem(token_url, TOKEN_URL_MAX, pattern=None):
        problems.append((("token_url",), problem))
    elif problem := _token_url_problem(token_url):
        problems.append((("token_url",), problem))
    shown["token_url"] = token_url
    client_id = value.get("client_id")
    if problem := _text_problem(client_id, CLIENT_ID_MAX, pattern=_VSCHAR_RE):
        problems.append((("client_id",), problem))
    shown["client_id"] = client_id
    for name, limit, pattern in (
        ("scope", SCOPE_MAX, _SCOPE_RE),
        ("audience", AUDIENCE_MAX, _VISIBLE_RE),
    ):
        # Left out when not given: the send path reads "" for absent.
        if value.get(name) in (None, ""):
            continue
        if problem := _text_problem(value[name], limit, pattern=pattern):
            problems.append(((name,), problem))
        shown[name] = value[name]
    return shown


def _token_url_problem(url: str) -> str | None:
    """The endpoint URL's destination policy, and https unless private
    destinations are allowed (the client secret travels to it)."""
    allow_private = settings.RELAY_ALLOW_PRIVATE_DESTINATIONS
    if not allow_private and not url.lower().startswith("https:"):
        return "The token URL must be https: the client secret is sent to it."
    problems = http_url_errors(url)
    return problems[0] if problems else None


def _text_problem(
    text: object, limit: int, *, pattern: re.Pattern | None
) -> str | None:
    """Why text is not a non-empty string of at most limit characters of the
    pattern (None: anything but control characters); never repeats it."""
    if not isinstance(text, str) or not text:
        return "Required: a non-empty string."
    if len(text) > limit:
        return f"At most {limit} characters."
    if pattern is not None:
        if not pattern.fullmatch(text) or text != text.strip():
            return (
                "Only visible ASCII characters, without spaces at either end."
                if pattern is not _SCOPE_RE
                else "Scope tokens of visible ASCII (no quote or backslash), "
                "separated by single spaces."
            )
    elif any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in text):
        return "No control characters or line breaks."
    return None


def _tls_columns(value: object) -> dict[str, object]:
    if not value:
        return {
            "tls_client_cert": "",
            "tls_client_key": None,
            "tls_ca_bundle": "",
            "tls_subject": "",
            "tls_not_after": None,
            "tls_expiry_warned_for": None,
        }
    if not isinstance(value, dict):
        raise CredentialsInvalid(
            [
                (
                    (),
                    'An object: "client_cert" and "client_key", "pkcs12", or "ca_bundle".',
                )
            ]
        )
    problems: list[tuple[Loc, str]] = [
        ((str(name)[:64],), "Not a field of tls.")
        for name in value
        if name not in _TLS_FIELDS
    ]
    given = {name for name in _TLS_FIELDS if value.get(name) not in (None, "")}
    identity = None
    if "pkcs12" in given and given & {"client_cert", "client_key"}:
        problems.append(
            (("pkcs12",), "Give client_cert and client_key, or pkcs12, not both.")
        )
    elif "pkcs12" in given:
        identity, found = client_certificates.identity_from_pkcs12(
            value["pkcs12"], value.get("password")
        )
        problems += [((name,), message) for name, message in found]
    elif given & {"client_cert", "client_key"}:
        identity, found = client_certificates.identity_from_pem(
            value.get("client_cert"), value.get("client_key")
        )
        problems += [((name,), message) for name, message in found]
    elif "ca_bundle" not in given:
        problems.append(
            ((), 'Give "client_cert" and "client_key", "pkcs12", or "ca_bundle".')
        )
    if "password" in given and "pkcs12" not in given:
        problems.append(
            (("password",), "Only with pkcs12: a PEM key is given unencrypted.")
        )
    bundle = ""
    if "ca_bundle" in given:
        bundle, found = client_certificates.ca_bundle_from_pem(value["ca_bundle"])
        problems += [((name,), message) for name, message in found]
    if problems:
        raise CredentialsInvalid(problems)
    return {
        "tls_client_cert": identity.chain_pem if identity else "",
        "tls_client_key": identity.key_pem if identity else None,
        "tls_ca_bundle": bundle or "",
        "tls_subject": identity.subject if identity else "",
        "tls_not_after": identity.not_after if identity else None,
        "tls_expiry_warned_for": None,
    }
