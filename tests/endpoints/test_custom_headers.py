"""Custom header names and values: what may be saved."""

from __future__ import annotations

import pytest

from endpoints.custom_headers import MAX_HEADERS, header_errors


@pytest.mark.parametrize(
    "headers",
    [None, {}, {"Authorization": "Bearer abc"}, {"X-Tenant": "t-1", "x-env": "prod"}],
)
def test_allowed(headers):
    assert header_errors(headers) == []


@pytest.mark.parametrize(
    "name",
    [
        "webhook-signature",
        "Webhook-Id",
        "content-type",
        "Content-Length",
        "HOST",
        "user-agent",
        "X-Relay-Attempt",
        "x-relay-anything",
        "Transfer-Encoding",
        "Connection",
        "Keep-Alive",
        "TE",
        "Trailer",
        "Upgrade",
        "Expect",
    ],
)
def test_reserved_names_are_refused(name):
    errors = header_errors({name: "v"})
    assert len(errors) == 1 and f"{name} is reserved" in errors[0]


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({"bad name": "v"}, "is not a header name"),
        ({"X-A": "line\r\nInjected: 1"}, "line breaks"),
        ({"X-A": 5}, "must be a string"),
        ({"X-A": "v", "x-a": "w"}, "given twice"),
        ({f"X-{i}": "v" for i in range(MAX_HEADERS + 1)}, "At most 20"),
        (["X-A", "v"], "JSON object"),
    ],
)
def test_bad_headers_are_refused(headers, message):
    assert any(message in e for e in header_errors(headers))


@pytest.mark.parametrize(
    "value",
    ["a\u0001b", "a\u2028b", "a\u0085b", "a\x7fb", "caf\u00e9", "a\x00b", "a\x1bb"],
    ids=["SOH", "LINE SEPARATOR", "NEL", "DEL", "non-ASCII", "NUL", "ESC"],
)
def test_a_value_outside_rfc_9110_field_characters_is_refused(value):
    """These were saved, then failed every send as a connection error."""
    errors = header_errors({"X-Token": value})
    assert len(errors) == 1 and errors[0].startswith("X-Token: ")
    assert "visible ASCII" in errors[0]


@pytest.mark.parametrize("value", ["", "a b\tc", "Bearer x!#$%&'()*+,-./~"])
def test_field_values_with_inner_spaces_and_tabs_are_accepted(value):
    assert header_errors({"X-Token": value}) == []


@pytest.mark.parametrize("name", ["X-Trail\n", "Host\n", "X-A\r", "\nX-A"])
def test_a_name_with_a_line_break_anywhere_is_refused(name):
    """'$' matches before a final newline: the name must match in full."""
    errors = header_errors({name: "v"})
    assert len(errors) == 1 and "is not a header name" in errors[0]


@pytest.mark.parametrize("name", ["HOST", "Host ", " webhook-id", "X-Relay-A\t"])
def test_reserved_names_are_compared_after_normalising(name):
    from endpoints.custom_headers import is_reserved

    assert is_reserved(name)


def test_messages_never_carry_a_value():
    secret = "s3cr3t-token-value"
    errors = header_errors({"webhook-id": secret, "X-B": secret + "\n"})
    assert errors and all(secret not in e for e in errors)
