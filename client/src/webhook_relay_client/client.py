"""`Client`: one typed method for each operation of the relay's REST API."""

from __future__ import annotations

from webhook_relay_client.events import EventCalls
from webhook_relay_client.merchants import MerchantCalls
from webhook_relay_client.pull import PullCalls


class Client(MerchantCalls, EventCalls, PullCalls):
    """A client of one relay's REST API (/api/v1/).

    >>> client = Client("https://relay.example.com", api_key)
    >>> client.publish(merchant="acme", type="order.paid", data={"id": 1},
    ...                idempotency_key=True)

    Keyword arguments: `timeout` (seconds, for the connect and each read),
    `retry` (a RetryPolicy: tries and waits on 429 and 503), and the seams
    `transport`, `sleep` and `clock`.
    """
