"""A request id on every request: in the X-Request-ID header and on every log line.

A trusted proxy's X-Request-ID is kept, so one id follows a request through
the proxy's logs and ours; from anyone else a new one is made (a client must
not be able to write what our log lines carry). 500s are logged by Django's
`django.request` logger inside this middleware, so they carry the id too,
and never the request body.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from relayproject.lib.logs import log_context
from relayproject.lib.proxies import is_trusted_proxy

HEADER = "X-Request-ID"
_ACCEPTABLE = re.compile(r"[A-Za-z0-9._:-]{8,128}")


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = self._request_id(request)  # type: ignore[attr-defined]
        with log_context(request_id=request.request_id):
            response = self.get_response(request)
        response[HEADER] = request.request_id
        return response

    def _request_id(self, request: HttpRequest) -> str:
        offered = request.META.get("HTTP_X_REQUEST_ID", "")
        peer = request.META.get("RELAY_PEER_ADDR", request.META.get("REMOTE_ADDR", ""))
        if _ACCEPTABLE.fullmatch(offered) and is_trusted_proxy(peer):
            return offered
        return uuid.uuid4().hex
