"""Template filters for the relay's vocabulary (deliveries/words.py)."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from deliveries import words
from endpoints.words import STATE_WORDS, status_words

register = template.Library()


@register.filter
def attempt_error(attempt) -> str:
    """An attempt's failure in plain words: "Connection refused", "HTTP 401 Unauthorized"."""
    return words.error_words(
        error_kind=attempt.error_kind,
        error_message=attempt.error_message,
        status_code=attempt.status_code,
    )


@register.filter
def answer_not_kept(attempt) -> bool:
    """A verification's attempt, whose answer's body and headers were dropped."""
    return words.answer_not_kept(attempt.response_body)


@register.filter
def delivery_error(delivery) -> str:
    """A delivery's last failure in the same words ("" when it has none)."""
    return words.last_error_words(
        last_error=delivery.last_error, status_code=delivery.last_status_code
    )


@register.filter
def error_text(last_error: str, status_code=None) -> str:
    """A stored last_error ("http 503", "connection_error: ...") in words."""
    return words.last_error_words(
        last_error=last_error or "", status_code=status_code or None
    )


@register.filter
def status_text(status_code) -> str:
    """ "HTTP 404 Not Found" for 404; "" for no status."""
    return status_words(status_code or None)


@register.filter
def state_word(breaker_state: str) -> str:
    """ "closed" -> "sending", "open" -> "paused", "half_open" -> "testing"."""
    return STATE_WORDS.get(breaker_state, breaker_state)


@register.filter
def breakable(name: str) -> str:
    """An event type that may wrap after its dots and underscores, never
    inside a word: "subscription.<wbr>payment_<wbr>method"."""
    return mark_safe(re.sub(r"([._])", r"\1<wbr>", escape(name or "")))


@register.filter
def lane_note(delivery) -> str:
    """ "Skipped in order" / "Replayed out of order" (deliveries/words.py), or ""."""
    return words.lane_note(
        status=delivery.status,
        ordering_key=delivery.ordering_key,
        out_of_order=delivery.out_of_order,
    )
