"""django-csp's middleware with the policy header built once per process.

django-csp builds the header from the settings twice for every response
(the policy and the report-only one), a tenth of a millisecond each time:
on `GET /healthz` a fifth of the request, on a publish a tenth (issue 21).
Here a response that asks for nothing of its own (no `csp_update`,
`csp_replace` or `csp_exempt` style override, no nonce taken) gets the
header built from the settings once, and kept until a test changes them;
any other response goes through django-csp's own code, unchanged. What is
sent is the same bytes either way (tests/relayproject/lib/test_cspheader.py).
"""

from __future__ import annotations

import http.client
from functools import cache

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject
from csp.middleware import CSPMiddleware as _CSPMiddleware
from csp.utils import build_policy
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest
from django.http.response import HttpResponseBase

_OVERRIDES = (
    "_csp_config",
    "_csp_update",
    "_csp_replace",
    "_csp_config_ro",
    "_csp_update_ro",
    "_csp_replace_ro",
)
_SETTINGS = ("CONTENT_SECURITY_POLICY", "CONTENT_SECURITY_POLICY_REPORT_ONLY")
_DEBUG_CODES = (http.client.INTERNAL_SERVER_ERROR, http.client.NOT_FOUND)


@cache
def _headers() -> tuple[tuple[str, str, str, tuple[str, ...]], ...]:
    """(header, value, the response's exemption attribute, excluded prefixes)
    for each policy the settings define, as django-csp would build them."""
    made = []
    for header, report_only, exempt, name in (
        (HEADER, False, "_csp_exempt", _SETTINGS[0]),
        (HEADER_REPORT_ONLY, True, "_csp_exempt_ro", _SETTINGS[1]),
    ):
        value = build_policy(report_only=report_only)
        if value:
            policy = getattr(settings, name, None) or {}
            prefixes = tuple(policy.get("EXCLUDE_URL_PREFIXES", None) or ())
            made.append((header, value, exempt, prefixes))
    return tuple(made)


@receiver(setting_changed)
def _forget(*, setting: str, **_kwargs) -> None:
    if setting in _SETTINGS:
        _headers.cache_clear()


class CSPMiddleware(_CSPMiddleware):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if getattr(request, "_csp_nonce", None) is not None or any(
            getattr(response, name, None) is not None for name in _OVERRIDES
        ):
            return super().process_response(request, response)
        if response.status_code in _DEBUG_CODES and settings.DEBUG:
            return response
        for header, value, exempt, prefixes in _headers():
            if (
                header not in response
                and getattr(response, exempt, False) is False
                and not request.path_info.startswith(prefixes)
            ):
                response[header] = value
        # As django-csp does: a nonce asked for after the header is written
        # would be in no policy, so asking raises.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response
