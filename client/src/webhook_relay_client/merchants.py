"""Calls for merchants, their endpoints, portal links and the event catalogue."""

from __future__ import annotations

from typing import Any

from webhook_relay_client.base import UNSET, BaseClient, fields, given, segment
from webhook_relay_client.models import (
    Endpoint,
    EndpointCreated,
    EventType,
    Merchant,
    PortalSession,
    RecoverResult,
    SecretRotated,
    SigningKeys,
)
from webhook_relay_client.pagination import Paginator


def _endpoint_at(merchant: str, endpoint_id: str) -> str:
    return f"/merchants/{segment(merchant)}/endpoints/{segment(endpoint_id)}"


class MerchantCalls(BaseClient):
    def create_merchant(
        self,
        *,
        slug: str,
        name: str,
        retry_schedule: list[float] | None = None,
        max_attempts: int | None = None,
        timeout_seconds: float | None = None,
    ) -> Merchant:
        """A new merchant (platform keys only), with the retry policy its
        endpoints take when they set none of their own."""
        body = given(
            slug=slug,
            name=name,
            retry_schedule=retry_schedule,
            max_attempts=max_attempts,
            timeout_seconds=timeout_seconds,
        )
        data, answer = self._call("POST", "/merchants", body=body)
        return self._build(Merchant, data, answer)

    def update_merchant(
        self,
        merchant: str,
        *,
        name: str = UNSET,
        retry_schedule: list[float] | None = UNSET,
        max_attempts: int | None = UNSET,
        timeout_seconds: float | None = UNSET,
        signing: str | None = UNSET,
    ) -> Merchant:
        """Change only the fields given (platform keys only); None clears a
        default, back to the relay's setting. Past the operator's bounds: a
        422 naming the bound. signing ("v1", "v1a" or "both"): how endpoints
        created from now on sign when they name no scheme; existing ones keep
        theirs."""
        body = fields(
            name=name,
            retry_schedule=retry_schedule,
            max_attempts=max_attempts,
            timeout_seconds=timeout_seconds,
            signing=signing,
        )
        data, answer = self._call("PATCH", f"/merchants/{segment(merchant)}", body=body)
        return self._build(Merchant, data, answer)

    def get_merchant(self, merchant: str) -> Merchant:
        return self._get(f"/merchants/{segment(merchant)}", Merchant)

    def create_endpoint(
        self,
        merchant: str,
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
        retry_schedule: list[float] | None = None,
        timeout_seconds: float | None = None,
        signing: str | None = None,
        auth: dict[str, Any] | None = None,
        tls: dict[str, Any] | None = None,
        visibility_timeout_seconds: int | None = None,
    ) -> EndpointCreated:
        """A new endpoint; the answer's `secret` (whsec_...) is shown only here.

        `kind` "http" (the default) posts to `url`; "rabbitmq", "nats", "redis"
        or "mqtt" publish to the broker `url` names (user:password in it are
        kept encrypted; answers show the password as ***) at `target`, e.g.
        {"exchange": "hooks", "routing_key": "orders"}, {"subject"},
        {"stream", "maxlen"}, {"topic"}. "pull" takes no `url`: its consumer
        fetches its messages (messages_pull), each leased for
        `visibility_timeout_seconds` (1 to 43200; None: the relay's default). `auth` ({"type": "basic", ...} or
        {"type": "oauth2", ...}) and `tls` ({"client_cert", "client_key",
        "ca_bundle"?} or {"pkcs12", "password"?}): HTTP only, write-only
        secrets (answers show neither the password, client secret nor key)."""
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
            retry_schedule=retry_schedule,
            timeout_seconds=timeout_seconds,
            signing=signing,
            auth=auth,
            tls=tls,
            visibility_timeout_seconds=visibility_timeout_seconds,
        )
        path = f"/merchants/{segment(merchant)}/endpoints"
        data, answer = self._call("POST", path, body=body)
        return self._build(EndpointCreated, data, answer)

    def list_endpoints(
        self, merchant: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Paginator[Endpoint]:
        """Every endpoint of the merchant, a page (`limit`, up to 200) at a time."""
        path = f"/merchants/{segment(merchant)}/endpoints"
        return self._list(path, Endpoint, cursor=cursor, limit=limit)

    def get_endpoint(self, merchant: str, endpoint_id: str) -> Endpoint:
        return self._get(_endpoint_at(merchant, endpoint_id), Endpoint)

    def update_endpoint(
        self,
        merchant: str,
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
        retry_schedule: list[float] | None = UNSET,
        timeout_seconds: float | None = UNSET,
        signing: str = UNSET,
        is_active: bool = UNSET,
        auth: dict[str, Any] | None = UNSET,
        tls: dict[str, Any] | None = UNSET,
        visibility_timeout_seconds: int | None = UNSET,
    ) -> Endpoint:
        """Change only the fields given; None clears max_attempts,
        retry_schedule, timeout_seconds (back to the merchant's default),
        rate_limit_per_second, max_in_flight (back to the relay's default),
        filter and headers. A broker `url` as answers show it (the password as
        ***), or without user:password, keeps the stored password on the same
        scheme, host and port; *** for another broker is refused, and a `url`
        without user:password there drops them."""
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
            retry_schedule=retry_schedule,
            timeout_seconds=timeout_seconds,
            signing=signing,
            is_active=is_active,
            auth=auth,
            tls=tls,
            visibility_timeout_seconds=visibility_timeout_seconds,
        )
        path = _endpoint_at(merchant, endpoint_id)
        data, answer = self._call("PATCH", path, body=body)
        return self._build(Endpoint, data, answer)

    def list_signing_keys(self, merchant: str) -> SigningKeys:
        """The public keys (whpk_...) that check the v1a signatures of the
        merchant's endpoints; the relay answers this without an API key."""
        return self._get(f"/merchants/{segment(merchant)}/signing-keys", SigningKeys)

    def delete_endpoint(self, merchant: str, endpoint_id: str) -> None:
        self._call("DELETE", _endpoint_at(merchant, endpoint_id))

    def rotate_secret(
        self, merchant: str, endpoint_id: str, *, overlap_seconds: int | None = None
    ) -> SecretRotated:
        """A new secret now; the previous one still signs until previous_expires_at:
        for overlap_seconds (0 to 604800; 0 stops it at once, for a leaked
        secret), or the relay's default overlap when not given."""
        path = _endpoint_at(merchant, endpoint_id) + "/rotate-secret"
        body = given(overlap_seconds=overlap_seconds) or None
        data, answer = self._call("POST", path, body=body)
        return self._build(SecretRotated, data, answer)

    def retry_verification(self, merchant: str, endpoint_id: str) -> Endpoint:
        """Send a fresh challenge; 409 unless awaiting verification, 429 too soon."""
        path = _endpoint_at(merchant, endpoint_id) + "/verification"
        data, answer = self._call("POST", path)
        return self._build(Endpoint, data, answer)

    def verify_endpoint(
        self, merchant: str, endpoint_id: str, *, challenge: str
    ) -> Endpoint:
        """Verify with the challenge the receiver was sent; 422 on a wrong one."""
        path = _endpoint_at(merchant, endpoint_id) + "/verify"
        data, answer = self._call("POST", path, body={"challenge": challenge})
        return self._build(Endpoint, data, answer)

    def recover_deliveries(
        self,
        merchant: str,
        endpoint_id: str,
        *,
        since: str,
        until: str | None = None,
        dry_run: bool | None = None,
    ) -> RecoverResult:
        """Dead deliveries of the endpoint created in [since, until) back to
        pending (ISO 8601 times); with dry_run only counted."""
        path = _endpoint_at(merchant, endpoint_id) + "/recover"
        body = given(since=since, until=until, dry_run=dry_run)
        data, answer = self._call("POST", path, body=body)
        return self._build(RecoverResult, data, answer)

    def create_portal_session(
        self, merchant: str, *, role: str | None = None
    ) -> PortalSession:
        """A single-use link into the merchant portal: "viewer" (the default),
        "developer" or "owner"."""
        path = f"/merchants/{segment(merchant)}/portal-sessions"
        data, answer = self._call("POST", path, body=given(role=role))
        return self._build(PortalSession, data, answer)

    def list_event_types(self) -> Paginator[EventType]:
        """The whole catalogue, by name."""
        return self._list("/event-types", EventType)

    def create_event_type(
        self,
        *,
        name: str,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        example: Any = None,
        deprecated: bool | None = None,
    ) -> EventType:
        """Add a type (platform keys); with a JSON Schema, published data must match."""
        body = given(
            name=name,
            description=description,
            schema=schema,
            example=example,
            deprecated=deprecated,
        )
        data, answer = self._call("POST", "/event-types", body=body)
        return self._build(EventType, data, answer)

    def get_event_type(self, name: str) -> EventType:
        return self._get(f"/event-types/{segment(name)}", EventType)

    def update_event_type(
        self,
        name: str,
        *,
        description: str = UNSET,
        schema: dict[str, Any] | None = UNSET,
        example: Any = UNSET,
        deprecated: bool = UNSET,
    ) -> EventType:
        """Change only the fields given; None clears the schema or the example."""
        body = fields(
            description=description,
            schema=schema,
            example=example,
            deprecated=deprecated,
        )
        data, answer = self._call("PATCH", f"/event-types/{segment(name)}", body=body)
        return self._build(EventType, data, answer)

    def delete_event_type(self, name: str) -> None:
        self._call("DELETE", f"/event-types/{segment(name)}")
