"""Calls for events, deliveries and the relay's own operational endpoints."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from webhook_relay_client.base import UNSET, BaseClient, fields, given, segment
from webhook_relay_client.errors import ApiError
from webhook_relay_client.models import (
    Delivery,
    DeliveryDetail,
    Endpoint,
    EndpointCreated,
    Event,
    EventDetail,
    Replayed,
    SecretRotated,
)
from webhook_relay_client.pagination import Paginator

OPERATIONAL = "/operational-endpoints"


def new_idempotency_key() -> str:
    return str(uuid.uuid4())


class EventCalls(BaseClient):
    def publish(
        self,
        *,
        merchant: str,
        type: str,
        data: Mapping[str, Any],
        ordering_key: str | None = None,
        idempotency_key: str | bool | None = None,
    ) -> Event:
        """Store an event and fan it out to the merchant's endpoints.

        With `idempotency_key` (a string, or True for a fresh random one) the
        publish is retried on 429/503 and a repeat of the same key and body
        answers the original event with `replayed=True`; without one a 429 or
        503 is raised at once, since sending again could publish twice."""
        if idempotency_key is True:
            idempotency_key = new_idempotency_key()
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        body = given(merchant=merchant, type=type, data=data, ordering_key=ordering_key)
        answer_data, answer = self._call("POST", "/events", body=body, headers=headers)
        replayed = answer.header("Idempotent-Replayed").lower() == "true"
        return self._build(Event, answer_data, answer, replayed=replayed)

    def publish_batch(self, events: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Up to 500 events (each {"merchant", "type", "data", "ordering_key"?}),
        stored all or nothing. Never retried: the batch takes no Idempotency-Key."""
        body = {"events": [dict(event) for event in events]}
        data, answer = self._call("POST", "/events/batch", body=body)
        items = data.get("items") if isinstance(data, Mapping) else None
        if not isinstance(items, list):
            raise ApiError("unexpected answer: no items", status=answer.status)
        return [self._build(Event, item, answer, replayed=False) for item in items]

    def get_event(self, event_id: str) -> EventDetail:
        """An event with its data and its deliveries."""
        return self._get(f"/events/{segment(event_id)}", EventDetail)

    def list_deliveries(
        self,
        *,
        status: str | None = None,
        merchant: str | None = None,
        endpoint_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Paginator[Delivery]:
        """Deliveries, newest first, filtered by any of status ("pending",
        "delivering", "succeeded", "dead", "waiting"), merchant, endpoint_id."""
        return self._list(
            "/deliveries",
            Delivery,
            cursor=cursor,
            status=status,
            merchant=merchant,
            endpoint_id=endpoint_id,
            limit=limit,
        )

    def get_delivery(self, delivery_id: str) -> DeliveryDetail:
        """A delivery with its attempts."""
        return self._get(f"/deliveries/{segment(delivery_id)}", DeliveryDetail)

    def replay_delivery(self, delivery_id: str) -> Replayed:
        """Send a dead or succeeded delivery again, with a fresh attempt budget."""
        path = f"/deliveries/{segment(delivery_id)}/replay"
        data, answer = self._call("POST", path)
        return self._build(Replayed, data, answer)

    def create_operational_endpoint(
        self,
        *,
        url: str | None = None,
        kind: str | None = None,
        target: dict[str, Any] | None = None,
        description: str | None = None,
        event_types: list[str] | None = None,
        max_attempts: int | None = None,
        rate_limit_per_second: float | None = None,
        filter: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        max_in_flight: int | None = None,
        permanent_statuses: list[int] | None = None,
        ordered: bool | None = None,
        signing: str | None = None,
        retry_schedule: list[float] | None = None,
        timeout_seconds: float | None = None,
        auth: dict[str, Any] | None = None,
        tls: dict[str, Any] | None = None,
        visibility_timeout_seconds: int | None = None,
    ) -> EndpointCreated:
        """An endpoint for the relay's own relay.* events (platform keys only)."""
        body = given(
            kind=kind,
            url=url,
            target=target,
            description=description,
            event_types=event_types,
            max_attempts=max_attempts,
            rate_limit_per_second=rate_limit_per_second,
            filter=filter,
            headers=headers,
            max_in_flight=max_in_flight,
            permanent_statuses=permanent_statuses,
            ordered=ordered,
            signing=signing,
            retry_schedule=retry_schedule,
            timeout_seconds=timeout_seconds,
            auth=auth,
            tls=tls,
            visibility_timeout_seconds=visibility_timeout_seconds,
        )
        data, answer = self._call("POST", OPERATIONAL, body=body)
        return self._build(EndpointCreated, data, answer)

    def list_operational_endpoints(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Paginator[Endpoint]:
        return self._list(OPERATIONAL, Endpoint, cursor=cursor, limit=limit)

    def get_operational_endpoint(self, endpoint_id: str) -> Endpoint:
        return self._get(f"{OPERATIONAL}/{segment(endpoint_id)}", Endpoint)

    def update_operational_endpoint(
        self,
        endpoint_id: str,
        *,
        kind: str = UNSET,
        url: str = UNSET,
        target: dict[str, Any] = UNSET,
        description: str = UNSET,
        event_types: list[str] = UNSET,
        max_attempts: int | None = UNSET,
        rate_limit_per_second: float | None = UNSET,
        filter: dict[str, Any] | None = UNSET,
        headers: dict[str, str] | None = UNSET,
        max_in_flight: int | None = UNSET,
        permanent_statuses: list[int] = UNSET,
        ordered: bool = UNSET,
        signing: str = UNSET,
        retry_schedule: list[float] | None = UNSET,
        timeout_seconds: float | None = UNSET,
        is_active: bool = UNSET,
        auth: dict[str, Any] | None = UNSET,
        tls: dict[str, Any] | None = UNSET,
        visibility_timeout_seconds: int | None = UNSET,
    ) -> Endpoint:
        """Change only the fields given, as update_endpoint does."""
        body = fields(
            kind=kind,
            url=url,
            target=target,
            description=description,
            event_types=event_types,
            max_attempts=max_attempts,
            rate_limit_per_second=rate_limit_per_second,
            filter=filter,
            headers=headers,
            max_in_flight=max_in_flight,
            permanent_statuses=permanent_statuses,
            ordered=ordered,
            signing=signing,
            retry_schedule=retry_schedule,
            timeout_seconds=timeout_seconds,
            is_active=is_active,
            auth=auth,
            tls=tls,
            visibility_timeout_seconds=visibility_timeout_seconds,
        )
        path = f"{OPERATIONAL}/{segment(endpoint_id)}"
        data, answer = self._call("PATCH", path, body=body)
        return self._build(Endpoint, data, answer)

    def delete_operational_endpoint(self, endpoint_id: str) -> None:
        self._call("DELETE", f"{OPERATIONAL}/{segment(endpoint_id)}")

    def rotate_operational_secret(
        self, endpoint_id: str, *, overlap_seconds: int | None = None
    ) -> SecretRotated:
        """As rotate_secret, for an operational endpoint."""
        path = f"{OPERATIONAL}/{segment(endpoint_id)}/rotate-secret"
        body = given(overlap_seconds=overlap_seconds) or None
        data, answer = self._call("POST", path, body=body)
        return self._build(SecretRotated, data, answer)
