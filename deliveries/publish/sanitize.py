"""Text from a receiver made fit for a database column.

PostgreSQL text cannot hold U+0000 and psycopg cannot encode a lone UTF-16
surrogate (what bytes decoded with errors="surrogateescape" leave behind), so
one bad byte would fail the whole flush it is recorded in. Every string that
dispatch/outcomes.py stores and that a receiver could have shaped passes
through here; the API refuses input that matches UNSTORABLE (a 422).
"""

from __future__ import annotations

from relayproject.lib.jsonlimits import UNSTORABLE

__all__ = ["UNSTORABLE", "storable_text"]

REPLACEMENT = "\ufffd"


def storable_text(value: str | None, *, limit: int | None = None) -> str:
    """value as valid UTF-8 without NUL, cut to at most limit characters.

    Each NUL and lone surrogate becomes one U+FFFD, so a person reading an
    attempt still sees that something was there.
    """
    if not value:
        return ""
    value = value[:limit]
    if value.isascii() and "\0" not in value:
        # The usual case (a status line's words, ids, ASCII headers), every
        # attempt: no lone surrogate is ASCII, so only a NUL could need work.
        return value
    return UNSTORABLE.sub(REPLACEMENT, value)
