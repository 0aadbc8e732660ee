"""The API's answers as frozen dataclasses, one per schema of the OpenAPI
document (field names as the API spells them; timestamps as the API writes
them, ISO 8601 UTC strings). Secrets and single-use links are left out of
repr(), so logging an answer does not log them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Generic, TypeVar

from webhook_relay_client.headers import headers_problem

A = TypeVar("A", bound="_Answer")
T = TypeVar("T")


class _Answer:
    # Fields holding another answer (a tuple of them when in a list), and the
    # fields the API may leave out (read as None).
    nested: ClassVar[Mapping[str, Any]] = {}
    may_be_absent: ClassVar[frozenset] = frozenset()

    @classmethod
    def from_json(cls: type[A], data: Any, **extra: Any) -> A:
        """Build from the parsed JSON; ValueError when a field is missing."""
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a JSON object for {cls.__name__}")
        values = dict(extra)
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name in values:
                continue
            if f.name in data:
                raw = data[f.name]
            elif f.name in cls.may_be_absent:
                raw = None
            else:
                raise ValueError(f"the answer's {cls.__name__} lacks {f.name!r}")
            values[f.name] = _convert(cls.nested.get(f.name), raw)
        cls.check(values)
        return cls(**values)

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        """ValueError when a field's value is not of its type. Checked where
        a wrong type would crash the code that reads it (listen's answers);
        the other answers are read as the API documents them."""


def _strings(values: dict[str, Any], *names: str) -> None:
    for name in names:
        if not isinstance(values[name], str):
            raise ValueError(f"{name!r} is not a string")


def _string_lists(values: dict[str, Any], *names: str, may_be_null=False) -> None:
    for name in names:
        found = values[name]
        if found is None and may_be_null:
            continue
        if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
            raise ValueError(f"{name!r} is not a list of strings")


def usable_id(raw: Any) -> str | None:
    """A pulled item's id if it can name the item in a nack and a printed
    line (a short string of printable characters), else None."""
    if isinstance(raw, Mapping):
        found = raw.get("id")
        if isinstance(found, str) and 0 < len(found) <= 255 and found.isprintable():
            return found
    return None


def _convert(kind: Any, raw: Any) -> Any:
    if kind is None or raw is None:
        return raw
    if isinstance(kind, tuple):  # (Answer,): a list of them
        return tuple(kind[0].from_json(item) for item in raw)
    return kind.from_json(raw)


@dataclass(frozen=True)
class Merchant(_Answer):
    slug: str
    name: str
    is_active: bool
    # Its endpoints' retry policy defaults; None: the relay's setting.
    retry_schedule: list[float] | None
    max_attempts: int | None
    timeout_seconds: float | None
    # How its new endpoints sign when they name none; None: the relay's default.
    signing: str | None
    created_at: str


@dataclass(frozen=True)
class Verification(_Answer):
    state: str
    verified_at: str | None
    verified_by: str
    requested_at: str | None


@dataclass(frozen=True)
class Endpoint(_Answer):
    nested: ClassVar[Mapping[str, Any]] = {"verification": Verification}

    id: str
    merchant: str
    kind: str  # "http", "rabbitmq", "nats", "redis", "mqtt" or "pull"
    url: str  # a broker's with its password shown as ***; "" for pull
    target: dict
    has_credentials: bool
    description: str
    event_types: list[str]
    is_active: bool
    disabled_reason: str
    max_attempts: int | None
    rate_limit_per_second: float | None
    filter: dict | None
    headers: dict[str, str]
    max_in_flight: int | None
    permanent_statuses: list[int]
    ordered: bool
    # Its own; None: its merchant's default, else the relay's.
    retry_schedule: list[float] | None
    timeout_seconds: float | None
    signing: str  # "v1" (HMAC), "v1a" (Ed25519) or "both"
    public_key: str | None  # whpk_...: checks the v1a signature; None with v1
    # {"type": "basic", "username"} or {"type": "oauth2", "token_url",
    # "client_id", "scope", "audience"}: never the password or client secret.
    auth: dict | None
    # {"subject", "not_after", "ca_bundle", "expires_soon", "expired"}: never the key.
    tls: dict | None
    # A pull endpoint's own lease of a pulled message; None: the relay's default.
    visibility_timeout_seconds: int | None
    listen_session: bool  # made by `listen` for one run of it
    breaker_state: str
    verification: Verification
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class EndpointCreated(Endpoint):
    """An endpoint as created: with its signing secret, shown only this once."""

    secret: str = field(repr=False)


@dataclass(frozen=True)
class SecretRotated(_Answer):
    secret: str = field(repr=False)
    previous_expires_at: str


@dataclass(frozen=True)
class SigningKey(_Answer):
    may_be_absent: ClassVar[frozenset] = frozenset({"not_after"})

    endpoint_id: str
    public_key: str  # whpk_ + base64 of the 32-byte Ed25519 public key
    not_after: str | None  # when the key stops signing; None: no end set


@dataclass(frozen=True)
class SigningKeys(_Answer):
    nested: ClassVar[Mapping[str, Any]] = {"keys": (SigningKey,)}

    keys: tuple[SigningKey, ...]


@dataclass(frozen=True)
class RecoverResult(_Answer):
    count: int


@dataclass(frozen=True)
class PortalSession(_Answer):
    url: str = field(repr=False)  # a single-use link: as good as a password
    expires_at: str


@dataclass(frozen=True)
class EventType(_Answer):
    name: str
    description: str
    schema: dict | None
    example: Any
    deprecated: bool
    created_at: str
    updated_at: str


@dataclass(frozen=True)
class DeliveryRef(_Answer):
    id: str
    endpoint_id: str
    status: str


@dataclass(frozen=True)
class Event(_Answer):
    """A published event; `replayed` is True when the answer was the original
    event for a repeated Idempotency-Key (Idempotent-Replayed: true)."""

    nested: ClassVar[Mapping[str, Any]] = {"deliveries": (DeliveryRef,)}

    id: str
    type: str
    merchant: str
    created_at: str
    deliveries: tuple[DeliveryRef, ...]
    replayed: bool


@dataclass(frozen=True)
class EventDetail(_Answer):
    nested: ClassVar[Mapping[str, Any]] = {"deliveries": (DeliveryRef,)}

    id: str
    type: str
    merchant: str
    created_at: str
    deliveries: tuple[DeliveryRef, ...]
    data: Any
    ordering_key: str


@dataclass(frozen=True)
class Held(_Answer):
    reason: str
    text: str
    until: str | None


@dataclass(frozen=True)
class Delivery(_Answer):
    nested: ClassVar[Mapping[str, Any]] = {"held": Held}
    may_be_absent: ClassVar[frozenset] = frozenset({"held"})

    id: str
    event_id: str
    endpoint_id: str
    merchant: str
    status: str
    attempt_count: int
    next_attempt_at: str
    last_attempt_at: str | None
    last_status_code: int | None
    last_error: str
    last_response_ms: float | None
    created_at: str
    succeeded_at: str | None
    dead_at: str | None
    ordering_key: str
    out_of_order: bool
    held: Held | None


@dataclass(frozen=True)
class Attempt(_Answer):
    number: int
    started_at: str
    outcome: str
    status_code: int | None
    response_ms: float | None
    error_kind: str
    error_message: str
    response_excerpt: str
    worker_id: str
    request_url: str | None
    request_headers: list[list[str]] | None
    response_headers: list[list[str]] | None


@dataclass(frozen=True)
class DeliveryDetail(Delivery):
    nested: ClassVar[Mapping[str, Any]] = {"held": Held, "attempts": (Attempt,)}

    attempts: tuple[Attempt, ...]


@dataclass(frozen=True)
class Replayed(_Answer):
    id: str
    status: str


@dataclass(frozen=True)
class Message(_Answer):
    """A pulled message, leased to this consumer until lease_expires_at: ack
    or nack it by id before then."""

    id: str  # the delivery's
    attempt: int  # counted from 1, as X-Relay-Attempt
    # As a POST would carry them: webhook-id, webhook-timestamp,
    # webhook-signature, X-Relay-*, Content-Type.
    headers: dict[str, str]
    body: str  # the exact body: its UTF-8 bytes are what the signature covers
    lease_expires_at: str

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        if usable_id(values) is None:
            raise ValueError("its id is not a short printable string")
        attempt = values["attempt"]
        if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
            raise ValueError("its attempt is not a whole number from 1")
        problem = headers_problem(values["headers"])
        if problem:
            raise ValueError(problem)
        _strings(values, "body", "lease_expires_at")


@dataclass(frozen=True)
class UnusableMessage:
    """A pulled item that is not a usable Message (a field missing or of the
    wrong type, a header that cannot be sent): `id` when it has one to nack
    it by, else None; `why` says what is wrong with it."""

    id: str | None
    why: str


@dataclass(frozen=True)
class AckResult(_Answer):
    acked: list[str]
    # Not this endpoint's, never handed out, already answered, or leased past
    # its time: nothing changed for these.
    rejected: list[str]

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        _string_lists(values, "acked", "rejected")


@dataclass(frozen=True)
class NackResult(_Answer):
    nacked: list[str]
    rejected: list[str]

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        _string_lists(values, "nacked", "rejected")


@dataclass(frozen=True)
class ListenSession(_Answer):
    """A pull endpoint made for one run of `listen`; `id` is its endpoint's."""

    id: str
    description: str
    event_types: list[str]
    filter: dict | None
    state: str  # "live" or "ended"
    created_at: str
    # When it ends unless pulled before; once ended, when it ended.
    expires_at: str | None
    last_pulled_at: str | None
    ended_reason: str  # "" while live
    signing: str  # "v1" (HMAC with the secret), "v1a" (Ed25519) or "both"
    public_key: str | None  # whpk_...: checks the v1a signature; None with v1

    @classmethod
    def check(cls, values: dict[str, Any]) -> None:
        if usable_id(values) is None:  # it goes into every later call's path
            raise ValueError("its id is not a short printable string")
        _strings(values, "state", "ended_reason", "signing")
        _string_lists(values, "event_types", may_be_null=True)
        if not isinstance(values.get("secret", ""), str):
            raise ValueError("'secret' is not a string")


@dataclass(frozen=True)
class ListenSessionCreated(ListenSession):
    """A listen session as started: with its signing secret, shown only here."""

    secret: str = field(repr=False)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a cursor list; pass next_cursor back for the next one."""

    items: tuple[T, ...]
    next_cursor: str | None
