"""A pulled message's headers: which can be sent at all, and which of them
`listen` passes on to the local URL.

The relay chooses these names and values, so they are checked as input: a
CR or LF in a value would start a header (or a request) of the relay's own
in the local server's stream, and a name that is not an HTTP token would
make a malformed request or an exception instead of a nack.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

# RFC 9110 5.6.2: the characters of a token, which a field name is.
TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits)
# Passed on to the local URL: the body's type and the webhook's own headers
# (the signature and its inputs, the relay's delivery details). Framing and
# routing (Host, Content-Length, Transfer-Encoding, Connection) are the
# sender's: a relay choosing them could make the local server read a second
# request out of the body, or route the POST to another virtual host.
FORWARDED_NAMES = frozenset({"content-type"})
FORWARDED_PREFIXES = ("webhook-", "x-relay-")
SHOWN_CHARS = 40  # of a bad name, in the line that reports it


def shown(text: str) -> str:
    """A relay-chosen string as a line may quote it: escaped, and short."""
    cut = text[:SHOWN_CHARS]
    return repr(cut) + ("..." if len(text) > SHOWN_CHARS else "")


def header_problem(name: Any, value: Any) -> str:
    """Why this header cannot be sent as it is; "" when it can."""
    if not isinstance(name, str) or not isinstance(value, str):
        return "a header name or value is not a string"
    if not name or not set(name) <= TOKEN_CHARS:
        return f"header name {shown(name)} is not an HTTP token"
    for char in value:
        # C0 controls (CR, LF and NUL among them) but tab, and DEL; past
        # Latin-1, http.client cannot encode the value at all.
        if (char < " " and char != "\t") or char == "\x7f":
            return f"header {shown(name)}: its value holds a control character"
        if char > "\xff":
            return f"header {shown(name)}: its value holds a character beyond Latin-1"
    return ""


def headers_problem(headers: Any) -> str:
    """Why these headers cannot be sent as they are; "" when they can."""
    if not isinstance(headers, Mapping):
        return "its headers are not a JSON object"
    seen: set[str] = set()
    for name, value in headers.items():
        problem = header_problem(name, value)
        if problem:
            return problem
        if name.lower() in seen:
            # Two values the local server would have to choose between.
            return f"header {shown(name)} is given twice"
        seen.add(name.lower())
    return ""


def is_forwarded(name: str) -> bool:
    lowered = name.lower()
    return lowered in FORWARDED_NAMES or lowered.startswith(FORWARDED_PREFIXES)


def forwardable(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers a POST to the local URL carries, of those a message has."""
    return {name: value for name, value in headers.items() if is_forwarded(name)}
