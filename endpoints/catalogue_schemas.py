"""Request and response shapes of the event-type catalogue in the API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import StringConstraints

from endpoints.matching import EVENT_TYPE_RE, MAX_EVENT_TYPE_LENGTH

EventTypeName = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_EVENT_TYPE_LENGTH, pattern=EVENT_TYPE_RE.pattern
    ),
]


class EventTypeIn(Schema):
    name: EventTypeName = Field(examples=["order.paid"])
    description: str = Field(
        "", max_length=2000, examples=["A customer paid for an order."]
    )
    schema_: dict[str, Any] | None = Field(
        None,
        alias="schema",
        examples=[
            {
                "type": "object",
                "required": ["order"],
                "properties": {"order": {"type": "object"}},
            }
        ],
    )
    example: Any = Field(None, examples=[{"order": {"id": 8812, "amount": 1999}}])
    deprecated: bool = False


class EventTypePatch(Schema):
    description: str | None = Field(None, max_length=2000)
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    example: Any = None
    deprecated: bool | None = None


class EventTypeOut(Schema):
    name: str
    description: str
    schema_: dict[str, Any] | None = Field(alias="schema")
    example: Any
    deprecated: bool
    created_at: datetime
    updated_at: datetime


class EventTypePage(Schema):
    items: list[EventTypeOut]
    next_cursor: str | None
