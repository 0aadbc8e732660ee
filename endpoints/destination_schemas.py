"""The destination fields of the endpoint schemas (endpoints.schemas): kind,
url and target, their descriptions, and the HTTP url check run with the other
field checks."""

from __future__ import annotations

from typing import Annotated, Literal

from django.core.exceptions import ValidationError
from pydantic import AfterValidator, StringConstraints, ValidationInfo

from endpoints import brokers
from endpoints.endpoint_fields import endpoint_url_check


def _allowed_destination(url: str, info: ValidationInfo) -> str:
    """An HTTP endpoint's destination policy, run with the other field checks so
    one 422 names all. A broker URL is checked by the service, against the
    merchant's broker hosts; so is a changed URL whose kind is not given, unless
    its scheme says HTTP."""
    kind = info.data.get("kind")
    if kind is None and "kind" in info.data:  # a change that keeps the kind
        kind = brokers.HTTP if url.lower().startswith(("http:", "https:")) else ""
    if kind != brokers.HTTP:
        return url
    try:
        endpoint_url_check(url)
    except ValidationError as exc:
        raise ValueError(exc.message_dict["url"][0]) from None
    return url


Kind = Literal["http", "rabbitmq", "nats", "redis", "mqtt", "pull"]
KIND_DESCRIPTION = (
    "What the endpoint is: `http` posts each event to `url`; `rabbitmq`, "
    "`nats`, `redis` and `mqtt` publish it to the broker `url` names, at "
    "`target`; `pull` holds each event for its consumer, who fetches it from "
    "`/merchants/{slug}/endpoints/{id}/messages` and acks it. Broker kinds are "
    "offered only where the operator lists the broker hosts merchants may use "
    "(RELAY_BROKER_HOSTS, RELAY_BROKER_KINDS). A kind cannot change to or "
    "from `pull`."
)
URL_DESCRIPTION = (
    "Required but for `pull`, which takes none. "
    "For `http`, the URL each event is posted to. For a broker kind, the "
    "broker's URL: `amqp://` or `amqps://` (vhost in the path), `nats://` or "
    "`tls://`, `redis://` or `rediss://` (database number in the path), "
    "`mqtt://` or `mqtts://`. A broker URL may carry `user:password@`: they are "
    "kept encrypted, and answers show the password as `***` (a user or a "
    "password alone, such as a NATS token or a Redis password, as `***` "
    "whole). A change that gives `***` in the password's place keeps the "
    "stored password, with the user given, while the scheme, host and port "
    "stay the same; `***` for another broker, or on a new endpoint, is "
    "refused. A URL given without `user:password@` keeps the stored ones on "
    "the same broker and drops them on another."
)
TARGET_DESCRIPTION = (
    'Where on the broker: `rabbitmq` `{"exchange", "routing_key"}` '
    "(published mandatory: an unroutable message is a failure; the default "
    'exchange is ""); `nats` `{"subject"}` (a JetStream subject); `redis` '
    '`{"stream", "maxlen"?}` (approximate MAXLEN); `mqtt` `{"topic"}` '
    "(QoS 1). `http` and `pull` take none: `{}`."
)
Destination = Annotated[
    str,
    StringConstraints(min_length=1, max_length=2000),
    AfterValidator(_allowed_destination),
]
TARGET_EXAMPLES = [{"exchange": "webhooks", "routing_key": "orders"}]
