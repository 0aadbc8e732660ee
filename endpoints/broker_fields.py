"""An endpoint's destination as the services take it: kind, url and target.

A broker endpoint's url may carry user:password. What is stored is the url
without them, the target as its kind keeps it, and the credentials apart
(Endpoint.broker_credentials, encrypted, never shown). The save-time policy
is the one the dispatcher applies at send: the kind must be offered
(RELAY_BROKER_KINDS) and the broker host must pass check_broker_host with
the merchant's host patterns (endpoints/brokers.py).

A pull endpoint (kind "pull") has no destination: url "" and target {}, and
its kind is fixed at creation.

Errors are keyed as the faces show them: "kind", "url", "target" and
"target.<field>". A URL's error never repeats the URL: it may hold a password.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import unquote

from django.conf import settings

from endpoints import brokers, destinations
from endpoints.models import Endpoint, Merchant

Errors = dict[str, list[str]]
URL_LIMIT = 2000  # characters, as Endpoint.url holds

NOT_VERIFIED = (
    "A broker endpoint is never verified: nothing at a broker can answer a "
    "challenge, and the operator's list of broker hosts is what it is trusted by."
)
MASKED = (
    f"{brokers.MASK} stands for a stored password, kept only for the same "
    "broker (scheme, host and port); give the password itself."
)
NO_STATUSES = (
    "Only an HTTP endpoint has response statuses to stop on; a broker "
    "endpoint takes []."
)
NO_PULL_URL = (
    "A pull endpoint has no URL: the relay sends it nothing, its consumer "
    "fetches its messages. Leave url out."
)
NO_PULL_TARGET = "A pull endpoint takes no target; send {} or leave it out."
KIND_FIXED = (
    "An endpoint cannot change to or from kind pull (its messages wait to be "
    "fetched, not sent): create a new endpoint instead."
)
URL_REQUIRED = "Required."


@dataclass(frozen=True)
class Destination:
    """The columns an endpoint's destination is stored in."""

    kind: str
    url: str  # credential-free
    target: dict[str, object]
    credentials: str | None = field(default=None, repr=False)

    @property
    def is_broker(self) -> bool:
        return self.kind in brokers.BROKER_KINDS

    def columns(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "url": self.url,
            "target": self.target,
            "broker_credentials": self.credentials,
        }


def broker_hosts_in_force(merchant: Merchant) -> list[str]:
    """The host patterns the merchant's broker endpoints may use: its own
    list when staff set one, else RELAY_BROKER_HOSTS."""
    if merchant.broker_hosts is not None:
        return list(merchant.broker_hosts)
    return list(settings.RELAY_BROKER_HOSTS)


def kinds_offered() -> tuple[str, ...]:
    """The broker kinds RELAY_BROKER_KINDS offers, in the usual order."""
    return tuple(k for k in brokers.BROKER_KINDS if k in settings.RELAY_BROKER_KINDS)


def kind_errors(kind: object) -> list[str]:
    if kind not in brokers.KINDS:
        return [f"Choose one of: {', '.join(brokers.KINDS)}."]
    if kind in (brokers.HTTP, brokers.PULL):
        return []  # offered everywhere: neither calls anything the operator lists
    offered = kinds_offered()
    if not offered:
        return ["Broker destinations are turned off on this relay."]
    if kind not in offered:
        return [
            f"This kind is not offered here; the kinds offered are: "
            f"{', '.join((brokers.HTTP, *offered))}."
        ]
    return []


def http_url_errors(url: str) -> list[str]:
    """The destination policy of an HTTP endpoint's url (CONTRACT section 4)."""
    try:
        destinations.check_url(
            url, allow_private=settings.RELAY_ALLOW_PRIVATE_DESTINATIONS
        )
    except destinations.DestinationRefused as exc:
        return [_reason(exc)]
    return []


def destination_clean(
    *, merchant: Merchant, kind: object, url: str | None, target: object
) -> tuple[Destination | None, Errors]:
    """A new destination checked against the policy: (what to store, errors).
    A pull endpoint has none: no url, no target."""
    if problems := kind_errors(kind):
        return None, {"kind": problems}
    if kind == brokers.PULL:
        return _pull_destination(url, target)
    if url is None or url == "":
        return None, {"url": [URL_REQUIRED]}
    if not isinstance(url, str) or len(url) > URL_LIMIT:
        return None, {"url": [f"At most {URL_LIMIT} characters."]}
    if kind == brokers.HTTP:
        errors = _http_target_errors(target)
        if problems := http_url_errors(url):
            errors["url"] = problems
        return Destination(brokers.HTTP, url, {}), errors
    errors = _target_errors(kind, target)
    try:
        split = brokers.broker_url_split(kind, url)
        brokers.check_broker_host(
            split.host,
            split.port,
            patterns=broker_hosts_in_force(merchant),
            allow_private=settings.RELAY_ALLOW_PRIVATE_DESTINATIONS,
        )
    except destinations.DestinationRefused as exc:
        errors["url"] = [_reason(exc)]
        return None, errors
    if errors:
        return None, errors
    cleaned = brokers.target_clean(kind, target)  # type: ignore[arg-type]
    # "amqp://:@host" names no one: as good as no credentials.
    credentials = split.credentials if split.credentials not in ("", ":") else None
    if credentials is not None and brokers.MASK in unquote(credentials):
        return None, {"url": [MASKED]}
    return Destination(kind, split.url, cleaned, credentials), {}


def destination_change(
    *, endpoint: Endpoint, kind: object = None, url: object = None, target=None
) -> tuple[Destination | None, Errors]:
    """An endpoint's destination after a change of some of kind, url and
    target (None: not changed); (None, {}) when none is changed.

    A url given without credentials keeps the stored ones only while the
    scheme, host and port stay the same (a form showing the clean url can be
    saved again); credentials never follow an endpoint to another broker."""
    if kind is None and url is None and target is None:
        return None, {}
    new_kind = endpoint.kind if kind is None else kind
    same_kind = new_kind == endpoint.kind
    if not same_kind and brokers.PULL in (new_kind, endpoint.kind):
        # Its deliveries would change from held to sent (or back) mid-lease.
        return None, {"kind": [KIND_FIXED]}
    if new_kind == brokers.PULL:
        return _pull_destination(url, {} if target is None else target)
    if target is None:
        target = endpoint.target if same_kind else {}
    if url is None and same_kind:
        # The target alone: the URL (and its credentials) stay as they are.
        if problems := kind_errors(new_kind):
            return None, {"kind": problems}
        if new_kind == brokers.HTTP:
            errors = _http_target_errors(target)
            cleaned: dict[str, object] = {}
        else:
            errors = _target_errors(new_kind, target)
            cleaned = {} if errors else brokers.target_clean(new_kind, target)
        kept = Destination(new_kind, endpoint.url, cleaned, endpoint.broker_credentials)
        return (None if errors else kept), errors
    given = endpoint.url if url is None else url
    unmasked = _unmasked(endpoint, new_kind, given) if same_kind else None
    if unmasked is not None:
        # The URL as an answer showed it, password masked: the stored one
        # stands in, for this same broker only.
        given = brokers.broker_url_join(
            brokers.broker_url_split(new_kind, given).url, unmasked
        )
    destination, errors = destination_clean(
        merchant=endpoint.merchant,
        kind=new_kind,
        url=given,
        target=target,
    )
    if (
        destination is not None
        and destination.is_broker
        and destination.credentials is None
        and endpoint.broker_credentials
        and same_kind
        and _same_server(new_kind, endpoint.url, destination.url)
    ):
        destination = replace(destination, credentials=endpoint.broker_credentials)
    return destination, errors


def _unmasked(endpoint: Endpoint, kind: str, url: object) -> str | None:
    """The credentials a URL with MASK for its password stands for, when it
    names the endpoint's own broker; None otherwise."""
    if kind == brokers.HTTP or not isinstance(url, str):
        return None
    try:
        split = brokers.broker_url_split(kind, url)
    except destinations.DestinationRefused:
        return None
    if not split.credentials or not _same_server(kind, endpoint.url, split.url):
        return None
    return brokers.credentials_unmasked(split.credentials, endpoint.broker_credentials)


def _same_server(kind: str, old_url: str, new_url: str) -> bool:
    try:
        old = brokers.broker_url_split(kind, old_url)
        new = brokers.broker_url_split(kind, new_url)
    except destinations.DestinationRefused:
        return False
    return (old.scheme, old.host, old.port) == (new.scheme, new.host, new.port)


def _pull_destination(url: object, target: object) -> tuple[Destination | None, Errors]:
    """A pull endpoint's destination: none. A URL or target given is refused,
    not dropped, so a client that meant another kind hears of it."""
    errors: Errors = {}
    if url:
        errors["url"] = [NO_PULL_URL]
    if target:
        errors["target"] = [NO_PULL_TARGET]
    return (None if errors else Destination(brokers.PULL, "", {})), errors


def _http_target_errors(target: object) -> Errors:
    if target:
        return {"target": ["An HTTP endpoint takes no target; send {}."]}
    return {}


def _target_errors(kind: str, target: object) -> Errors:
    if not isinstance(target, Mapping):
        fields = ", ".join(brokers.TARGET_FIELDS[kind])
        return {"target": [f"An object with this kind's fields: {fields}."]}
    return {
        name if name == "kind" else f"target.{name}": [message]
        for name, message in brokers.target_errors(kind, target).items()
    }


def _reason(exc: destinations.DestinationRefused) -> str:
    if exc.code == destinations.DNS_ERROR:
        # Said plainly: a host that goes live later cannot be saved yet.
        return exc.reason + ": the host must exist in DNS when the endpoint is saved"
    return exc.reason
