"""Broker destinations (issue 41): which kinds there are, what a broker URL
and a target may be, and which broker hosts a merchant may reach.

An endpoint's `kind` is "http" (posts to its URL) or a broker kind, which
publishes to the broker its URL names, at its `target`. The URL is kept
without credentials (`url`); the user and password are split off here and
encrypted apart (Endpoint.broker_credentials), never shown back.

Who may point at a broker: nobody, unless the operator lists broker hosts
(RELAY_BROKER_HOSTS, or a merchant's own list set by staff). A pattern is
`host`, `host:port`, `*.domain` or `*.domain:port`, matched against the host
as the sender reads it (lower case, IDNA), one host meaning at save and at
send. The addresses the host resolves to are then judged: a public address
passes; a private or loopback one only where the operator listed that
address itself (`127.0.0.1:5672`) or RELAY_ALLOW_PRIVATE_DESTINATIONS is on,
so a listed name cannot be pointed by its DNS at an internal address. The
sender connects only to the addresses this check returned.

No Django imports: this module must load (and be tested) without settings.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from yarl import URL

from endpoints.destinations import (
    DestinationRefused,
    Resolver,
    check_host,
    is_public_address,
)

HTTP = "http"
RABBITMQ = "rabbitmq"
NATS = "nats"
REDIS = "redis"
MQTT = "mqtt"
# Nothing is sent: the receiver fetches its messages over the REST API
# (deliveries/pull/). No URL, no target, never claimed by a dispatcher.
PULL = "pull"
BROKER_KINDS = (RABBITMQ, NATS, REDIS, MQTT)
KINDS = (HTTP, *BROKER_KINDS, PULL)
KIND_LABELS = {
    HTTP: "HTTPS URL",
    RABBITMQ: "RabbitMQ exchange",
    NATS: "NATS JetStream subject",
    REDIS: "Redis stream",
    MQTT: "MQTT topic",
    PULL: "Pull (the receiver fetches its messages)",
}

# Each kind's URL schemes, with the port each defaults to and whether it is TLS.
SCHEMES: dict[str, dict[str, tuple[int, bool]]] = {
    RABBITMQ: {"amqp": (5672, False), "amqps": (5671, True)},
    NATS: {"nats": (4222, False), "tls": (4222, True)},
    REDIS: {"redis": (6379, False), "rediss": (6379, True)},
    MQTT: {"mqtt": (1883, False), "mqtts": (8883, True)},
}

# The target fields of each kind, in the order forms show them.
TARGET_FIELDS: dict[str, tuple[str, ...]] = {
    HTTP: (),
    RABBITMQ: ("exchange", "routing_key"),
    NATS: ("subject",),
    REDIS: ("stream", "maxlen"),
    MQTT: ("topic",),
    PULL: (),
}
NAME_LIMIT = 255  # bytes: AMQP's short strings; the other names are kept to it too
MAXLEN_LIMIT = 10**9
_NATS_TOKEN = re.compile(r"[^\s.*>]+")


@dataclass(frozen=True)
class BrokerURL:
    """A broker URL split: what is kept in clear and what is encrypted."""

    url: str  # scheme://host:port/path, no credentials: shown, stored in clear
    credentials: str = field(default="", repr=False)  # "user:password", percent-encoded
    scheme: str = ""
    host: str = ""  # as the sender reads it: lower case, IDNA
    port: int = 0
    tls: bool = False
    path: str = ""  # the vhost (AMQP) or database number (Redis), decoded


def broker_url_split(kind: str, url: str) -> BrokerURL:
    """Check a broker URL for `kind` and split its credentials off.

    Raises DestinationRefused with a sentence for people; the sentence never
    repeats the URL (it may hold a password)."""
    schemes = SCHEMES.get(kind)
    if schemes is None:
        raise DestinationRefused(f"{kind!r} is not a broker kind", code="invalid")
    if any(ch <= " " or ch == "\x7f" for ch in url):
        raise DestinationRefused("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise DestinationRefused("the URL is not valid") from None
    if parts.scheme not in schemes:
        names = " or ".join(f"{s}://" for s in schemes)
        raise DestinationRefused(f"a {KIND_LABELS[kind]} URL starts with {names}")
    if parts.query or parts.fragment:
        raise DestinationRefused("the URL may not have a query or a fragment")
    if not parts.hostname:
        raise DestinationRefused("the URL has no host")
    if "%" in parts.hostname:
        raise DestinationRefused("the host may not contain '%'")
    if port == 0:
        raise DestinationRefused("port 0 is not valid")
    default_port, tls = schemes[parts.scheme]
    port = port or default_port
    try:
        parsed = URL(url)
        host = parsed.raw_host or ""
    except (ValueError, UnicodeError):
        raise DestinationRefused("the URL is not valid") from None
    path = unquote(parts.path[1:]) if parts.path.startswith("/") else ""
    if kind == REDIS and path and not path.isdigit():
        raise DestinationRefused("a Redis URL's path is a database number, as /0")
    if kind in (NATS, MQTT) and path:
        raise DestinationRefused(
            "this URL takes no path: the target names the subject or topic"
        )
    credentials = ""
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        credentials = userinfo
    netloc = f"[{host}]" if ":" in host else host
    clean = f"{parts.scheme}://{netloc}:{port}{parts.path}"
    return BrokerURL(
        url=clean,
        credentials=credentials,
        scheme=parts.scheme,
        host=host,
        port=port,
        tls=tls,
        path=path,
    )


def broker_url_join(url: str, credentials: str) -> str:
    """The URL with its credentials put back (the sender's, never shown)."""
    if not credentials:
        return url
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{credentials}@{rest}"


# What answers show in place of a password (CONTRACT section 8); given back
# in a changed URL for the same broker, it stands for the stored password.
MASK = "***"


def broker_url_shown(url: str, credentials: str | None) -> str:
    """The URL as answers and pages show it: the user kept, the password
    replaced by MASK; a user with no password (a NATS token) masked whole."""
    if not credentials:
        return url
    user, _, password = credentials.partition(":")
    return broker_url_join(url, f"{user}:{MASK}" if password and user else MASK)


def credentials_unmasked(given: str, stored: str | None) -> str | None:
    """given ("user:***" or "***" from a shown URL) with the stored password
    put back in MASK's place; None when given masks nothing or there is
    nothing stored to put back."""
    user, sep, password = given.partition(":")
    if not stored:
        return None
    stored_user, _, stored_password = stored.partition(":")
    if given == MASK:
        return stored
    if sep and password == MASK:
        return f"{user}:{stored_password}"
    return None


def credentials_split(credentials: str) -> tuple[str, str]:
    """(user, password) of "user:password", percent-decoded."""
    user, _, password = credentials.partition(":")
    return unquote(user), unquote(password)


def target_errors(kind: str, target: Mapping[str, object]) -> dict[str, str]:
    """Field -> what is wrong with it, for the target of `kind` ({} if fine)."""
    fields = TARGET_FIELDS.get(kind)
    if fields is None:
        return {"kind": f"choose one of: {', '.join(KINDS)}"}
    errors: dict[str, str] = {}
    for name in target:
        if name not in fields:
            errors[name] = f"a {KIND_LABELS[kind]} endpoint has no {name!r}"
    if kind == RABBITMQ:
        for name in ("exchange", "routing_key"):
            value = target.get(name, "")
            if not isinstance(value, str):
                errors[name] = "must be text"
            elif len(value.encode()) > NAME_LIMIT:
                errors[name] = f"at most {NAME_LIMIT} bytes"
        if not errors and not target.get("exchange") and not target.get("routing_key"):
            errors["routing_key"] = (
                "name a routing key (the queue's name on the default exchange)"
            )
    elif kind == NATS:
        errors |= _name_error("subject", target.get("subject"))
        subject = target.get("subject")
        if "subject" not in errors and not all(
            _NATS_TOKEN.fullmatch(token) for token in str(subject).split(".")
        ):
            errors["subject"] = (
                "dot-separated tokens without spaces or the wildcards * and >"
            )
    elif kind == REDIS:
        errors |= _name_error("stream", target.get("stream"))
        maxlen = target.get("maxlen")
        if maxlen is not None and (
            isinstance(maxlen, bool)
            or not isinstance(maxlen, int)
            or not 1 <= maxlen <= MAXLEN_LIMIT
        ):
            errors["maxlen"] = f"a whole number from 1 to {MAXLEN_LIMIT}, or empty"
    elif kind == MQTT:
        errors |= _name_error("topic", target.get("topic"))
        topic = target.get("topic")
        if "topic" not in errors and any(ch in str(topic) for ch in "+#"):
            errors["topic"] = "a topic to publish to has no wildcards (+ or #)"
    return errors


def _name_error(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, str) or not value:
        return {name: "required"}
    if len(value.encode()) > NAME_LIMIT:
        return {name: f"at most {NAME_LIMIT} bytes"}
    if any(ch < " " or ch == "\x7f" for ch in value):
        return {name: "may not contain control characters"}
    return {}


def target_clean(kind: str, target: Mapping[str, object]) -> dict[str, object]:
    """The target as stored: only the kind's fields, blanks dropped."""
    return {
        name: target[name]
        for name in TARGET_FIELDS.get(kind, ())
        if target.get(name) not in (None, "") or (kind == RABBITMQ and name in target)
    }


def host_allowed(host: str, port: int, patterns: Iterable[str]) -> bool:
    """True when (host, port) matches one of the operator's patterns."""
    host = host.lower().rstrip(".")
    for pattern in patterns:
        want_host, want_port = _pattern_split(pattern)
        if want_port not in ("", "*") and want_port != str(port):
            continue
        if want_host.startswith("*."):
            if fnmatch.fnmatchcase(host, want_host) and not _is_address(host):
                return True
        elif _same_host(host, want_host):
            return True
    return False


def listed_address(address: str, port: int, patterns: Iterable[str]) -> bool:
    """True when the operator listed this very address (not only a name)."""
    return any(
        _is_address(_pattern_split(p)[0]) and host_allowed(address, port, [p])
        for p in patterns
    )


def check_broker_host(
    host: str,
    port: int,
    *,
    patterns: Iterable[str],
    allow_private: bool,
    resolve: Resolver | None = None,
    addresses: list[str] | None = None,
) -> list[str]:
    """The addresses a broker send may dial for (host, port), or refused.

    `addresses`: already looked up (the dispatcher's bounded resolver);
    otherwise resolved here through the HTTP policy's lookup."""
    patterns = list(patterns)
    if not patterns:
        raise DestinationRefused(
            "broker destinations are not enabled: the operator lists the broker "
            "hosts that may be used (RELAY_BROKER_HOSTS)"
        )
    if not host_allowed(host, port, patterns):
        raise DestinationRefused(
            f"broker host {host!r} on port {port} is not one the operator allows"
        )
    if addresses is None:
        addresses = check_host(host, port, allow_private=True, resolve=resolve)
    if not allow_private:
        for address in addresses:
            if not is_public_address(address) and not listed_address(
                address, port, patterns
            ):
                raise DestinationRefused(
                    f"broker host {host!r} resolves to a private or loopback "
                    "address the operator has not listed"
                )
    return addresses


def patterns_errors(patterns: object) -> str:
    """What is wrong with a list of host patterns (staff's per-merchant list)."""
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        return "a list of host or host:port patterns"
    for pattern in patterns:
        host, port = _pattern_split(pattern)
        if not host or any(ch <= " " for ch in pattern):
            return f"{pattern!r} is not a host or host:port pattern"
        if port not in ("", "*") and not (port.isdigit() and 0 < int(port) < 65536):
            return f"{pattern!r} has a port that is not 1 to 65535 or *"
        if "*" in host and not (host.startswith("*.") and "*" not in host[2:]):
            return (
                f"{pattern!r}: a wildcard may only open the pattern, as *.example.com"
            )
    return ""


def _pattern_split(pattern: str) -> tuple[str, str]:
    pattern = pattern.strip().lower()
    if pattern.startswith("["):  # [::1]:5672
        host, _, rest = pattern[1:].partition("]")
        return host, rest.removeprefix(":")
    if pattern.count(":") == 1:
        host, port = pattern.split(":")
        return host, port
    return pattern, ""


def _same_host(host: str, want: str) -> bool:
    if _is_address(host) and _is_address(want):
        return ipaddress.ip_address(host) == ipaddress.ip_address(want)
    try:
        want = URL.build(scheme="x", host=want).raw_host or want
    except (ValueError, UnicodeError):
        return False
    return host == want.rstrip(".")


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
