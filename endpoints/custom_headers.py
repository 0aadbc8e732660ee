"""Custom headers an endpoint asks for on every request (pure checks).

Names the relay sets itself, or that would change how the request is framed,
are reserved: a merchant cannot forge a signature header or break the body.
Values may be credentials, so nothing here puts a value in a message.
"""

from __future__ import annotations

import re

MAX_HEADERS = 20
MAX_NAME_LENGTH = 100
MAX_VALUE_LENGTH = 1000
# RFC 9110 token characters, matched over the whole name (fullmatch: "$"
# would also match before a final newline, and "Host\n" would pass).
NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# RFC 9110 field-value: visible ASCII, with spaces and tabs only inside (a
# leading or trailing one is not part of the value), or empty. obs-text
# (bytes 0x80-0xFF) is refused, as any non-ASCII: the HTTP client cannot send
# it, and a control character (\x01, DEL, \u0085, \u2028) fails every send.
VALUE_RE = re.compile(r"(?:[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?)?")
RESERVED_NAMES = frozenset(
    {
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "expect",
        "host",
        "user-agent",
    }
)
RESERVED_PREFIXES = ("webhook-", "x-relay-")


def normalised(name: str) -> str:
    """A header name as HTTP compares it: no surrounding space, case ignored."""
    return name.strip().lower()


def is_reserved(name: str) -> bool:
    lowered = normalised(name)
    return lowered in RESERVED_NAMES or lowered.startswith(RESERVED_PREFIXES)


def header_errors(headers: object) -> list[str]:
    """Why these headers cannot be saved (each message names the header); [] if fine."""
    if headers is None:
        return []
    if not isinstance(headers, dict):
        return ['Headers are a JSON object of "name": "value" pairs.']
    if len(headers) > MAX_HEADERS:
        return [f"At most {MAX_HEADERS} custom headers; {len(headers)} given."]
    errors: list[str] = []
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            errors.append(
                f"{str(name)[:MAX_NAME_LENGTH]!r} is not a header name "
                "(letters, digits and -, no spaces)."
            )
            continue
        if len(name) > MAX_NAME_LENGTH:
            errors.append(
                f"{name[:40]}…: a name is at most {MAX_NAME_LENGTH} characters."
            )
            continue
        if is_reserved(name):
            errors.append(
                f"{name} is reserved: the relay sets it (webhook-*, x-relay-*, "
                "content-type, content-length, host, user-agent and the framing headers "
                "connection, keep-alive, te, trailer, upgrade, expect)."
            )
        if normalised(name) in seen:
            errors.append(f"{name} is given twice (names ignore case).")
        seen.add(normalised(name))
        if not isinstance(value, str):
            errors.append(f"{name}: the value must be a string.")
        elif len(value) > MAX_VALUE_LENGTH:
            errors.append(f"{name}: a value is at most {MAX_VALUE_LENGTH} characters.")
        elif not VALUE_RE.fullmatch(value):
            errors.append(
                f"{name}: the value may hold only visible ASCII characters, "
                "spaces and tabs (no line breaks, control or non-ASCII "
                "characters), and may not start or end with a space."
            )
    return errors
