"""Calls for pull endpoints (pull, ack, nack their messages) and listen
sessions (the pull endpoints `listen` makes for itself)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from webhook_relay_client.base import BaseClient, given, segment
from webhook_relay_client.errors import ApiError
from webhook_relay_client.models import (
    AckResult,
    ListenSession,
    ListenSessionCreated,
    Message,
    NackResult,
    UnusableMessage,
    usable_id,
)
from webhook_relay_client.pagination import Paginator
from webhook_relay_client.transport import Answer


def _messages_at(merchant: str, endpoint_id: str) -> str:
    return f"/merchants/{segment(merchant)}/endpoints/{segment(endpoint_id)}/messages"


def _message_or_unusable(item: Any) -> Message | UnusableMessage:
    try:
        return Message.from_json(item)
    except (ValueError, TypeError) as exc:
        return UnusableMessage(id=usable_id(item), why=str(exc))


def _sessions_at(merchant: str) -> str:
    return f"/merchants/{segment(merchant)}/listen-sessions"


class PullCalls(BaseClient):
    def messages_pull(
        self, merchant: str, endpoint_id: str, limit: int = 10
    ) -> list[Message]:
        """Lease up to `limit` (1 to 100) due messages of a pull endpoint, each
        this consumer's until its lease_expires_at; [] when none is due. An
        ended listen session raises ProblemError with status 410; an endpoint
        of another kind, 409. An item that is not a usable Message raises
        ApiError."""
        pulled, answer = self._pull(merchant, endpoint_id, limit)
        for item in pulled:
            if isinstance(item, UnusableMessage):
                raise ApiError(f"unexpected answer: {item.why}", status=answer.status)
        return pulled  # type: ignore[return-value]

    def _messages_pull_checked(
        self, merchant: str, endpoint_id: str, limit: int = 10
    ) -> list[Message | UnusableMessage]:
        """messages_pull, with each item that is not a usable Message (a
        field missing or of the wrong type, a header that cannot be sent)
        handed back as an UnusableMessage, to be nacked by its id: one bad
        item does not strand the others in their leases. `listen` pulls so;
        not public (yet): its answer is no one model of the API's."""
        return self._pull(merchant, endpoint_id, limit)[0]

    def _pull(
        self, merchant: str, endpoint_id: str, limit: int
    ) -> tuple[list[Message | UnusableMessage], Answer]:
        data, answer = self._call(
            "GET", _messages_at(merchant, endpoint_id), query=given(limit=limit)
        )
        items = data.get("items") if isinstance(data, Mapping) else None
        if not isinstance(items, list):
            raise ApiError("unexpected answer: no items", status=answer.status)
        return [_message_or_unusable(item) for item in items], answer

    def messages_ack(
        self, merchant: str, endpoint_id: str, ids: Iterable[str]
    ) -> AckResult:
        """Mark pulled messages succeeded (1 to 100 ids). Ids whose lease ran
        out, or that are not this endpoint's leased messages, come back in
        `rejected`, unchanged: a rejected message is handed out again."""
        path = _messages_at(merchant, endpoint_id) + "/ack"
        data, answer = self._call("POST", path, body={"ids": list(ids)})
        return self._build(AckResult, data, answer)

    def messages_nack(
        self,
        merchant: str,
        endpoint_id: str,
        ids: Iterable[str],
        retry_after_seconds: float | None = None,
    ) -> NackResult:
        """Record a failed attempt of each: due again after
        retry_after_seconds (else the endpoint's retry policy), or dead when
        it was the last attempt allowed. Rejected ids as for messages_ack."""
        path = _messages_at(merchant, endpoint_id) + "/nack"
        body = given(ids=list(ids), retry_after_seconds=retry_after_seconds)
        data, answer = self._call("POST", path, body=body)
        return self._build(NackResult, data, answer)

    def listen_session_create(
        self,
        merchant: str,
        event_types: list[str] | None = None,
        filter: dict[str, Any] | None = None,
        description: str | None = None,
    ) -> ListenSessionCreated:
        """Start a listen session: a pull endpoint (counted against the
        endpoint quota) that ends when listen_session_end is called, or after
        the relay's LISTEN_IDLE_SECONDS without a pull. Its `secret`
        (whsec_...) is shown only here; its `id` is the endpoint_id to pull."""
        body = given(event_types=event_types, filter=filter, description=description)
        data, answer = self._call("POST", _sessions_at(merchant), body=body or None)
        return self._build(ListenSessionCreated, data, answer)

    def listen_session_list(
        self, merchant: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Paginator[ListenSession]:
        """The merchant's live listen sessions, newest first."""
        return self._list(
            _sessions_at(merchant), ListenSession, cursor=cursor, limit=limit
        )

    def listen_session_get(self, merchant: str, session_id: str) -> ListenSession:
        """A live or ended session (`state`, and `ended_reason` once ended)."""
        path = f"{_sessions_at(merchant)}/{segment(session_id)}"
        return self._get(path, ListenSession)

    def listen_session_end(
        self, merchant: str, session_id: str, reason: str | None = None
    ) -> None:
        """End a session now: its unfinished messages go dead. reason
        "stopped" says its command stopped (the default: ended over the
        API). Ending an ended session is not an error."""
        path = f"{_sessions_at(merchant)}/{segment(session_id)}"
        self._call("DELETE", path, query=given(reason=reason))
