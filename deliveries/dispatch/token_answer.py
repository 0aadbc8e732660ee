"""A token server's answer to a client-credentials grant, judged (RFC 6749
5.1 and 5.2). Pure: bytes in, a token or a refusal out.

The token server is as hostile as a receiver: the body was already bounded
by the sender; here the token must be one header value can carry (visible
ASCII, no space, bounded), expires_in a plain number, and what a refusal
says is only the status and an error code from a fixed list, never the body
nor a code of the server's own making (either could echo anything, the
client secret included, or a part or an encoded copy of it that no
scrubbing would recognise).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

TOKEN_CHARS_LIMIT = 8192
# The error codes an attempt shows: RFC 6749 5.2's, and the common extensions
# (5.2 allows more; 4.1.2.1 names the last three). Any other is "another
# error code": the server chose its text, and it may carry the secret.
ERROR_CODES = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "temporarily_unavailable",
        "server_error",
        "access_denied",
    }
)
# RFC 6750 b64token is narrower; any visible ASCII is accepted, which is what
# keeps a header line whole (no space, CR, LF or control character).
_TOKEN = re.compile(r"[\x21-\x7e]+")
_NUMBER = re.compile(r"[0-9]{1,10}")


class TokenRefused(Exception):
    """No usable token; str() finishes the sentence "the token server <host> ..."."""


@dataclass(frozen=True)
class TokenAnswer:
    access_token: str = field(repr=False)
    expires_in: float | None  # seconds; None: the server did not say


def parse(status: int, body: bytes, *, body_limit: int) -> TokenAnswer:
    if not 200 <= status <= 299:
        raise TokenRefused(f"answered {status}{_error_code(body)}")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nesting past the stack
        if len(body) >= body_limit:
            raise TokenRefused(
                f"answered {status} with more than {body_limit} bytes"
            ) from None
        raise TokenRefused(f"answered {status} with a body that is not JSON") from None
    if not isinstance(data, dict):
        raise TokenRefused(f"answered {status} with JSON that is not an object")
    token = data.get("access_token")
    if token is None:
        raise TokenRefused(f"answered {status} without an access_token")
    if (
        not isinstance(token, str)
        or len(token) > TOKEN_CHARS_LIMIT
        or not _TOKEN.fullmatch(token)
    ):
        raise TokenRefused(
            "gave an access_token that is not visible ASCII of at most "
            f"{TOKEN_CHARS_LIMIT} characters without spaces"
        )
    token_type = data.get("token_type")
    # Required by RFC 6749 5.1 but left out by some servers: absent is read as
    # bearer, the only type this sender can use; any other type is refused.
    if token_type is not None and (
        not isinstance(token_type, str) or token_type.lower() != "bearer"
    ):
        raise TokenRefused("gave a token whose token_type is not Bearer")
    return TokenAnswer(token, _expires_in(data.get("expires_in")))


def _expires_in(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        value = int(value)  # some servers send the number as a string
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRefused("gave an expires_in that is not a number of seconds")
    if not math.isfinite(value):
        raise TokenRefused("gave an expires_in that is not a number of seconds")
    return max(float(value), 0.0)


def _error_code(body: bytes) -> str:
    """ " (error invalid_client)" for a code of ERROR_CODES, " (another error
    code)" for any other, "" when the answer has none."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    code = data.get("error") if isinstance(data, dict) else None
    if code is None:
        return ""
    if isinstance(code, str) and code in ERROR_CODES:
        return f" (error {code})"
    return " (another error code)"
